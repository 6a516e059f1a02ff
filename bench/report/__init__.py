"""From results to numbers and pages: metrics, report.md, report.html."""
