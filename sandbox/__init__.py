"""Per-attempt isolation: images, container sets, sweeper."""
