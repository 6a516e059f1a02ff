/* Preloaded into typesense-server (entrypoint.sh): every fallocate fails with
 * EOPNOTSUPP, which RocksDB takes as "no preallocation" and goes on.
 *
 * Why: RocksDB preallocates each write-ahead log (about 1.1 x its 4 MB write
 * buffer) with fallocate. On the container's /data tmpfs that is RAM, charged
 * to the attempt: 12.8 MiB of a set's ~123 MiB for a few hundred policy
 * chunks. Typesense 0.24.1 has no flag for the write buffer or the
 * preallocation. Without it the logs grow as written; nothing else changes
 * (measured: benchmarks/density.py, docs/performance.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>

int fallocate(int fd, int mode, off_t offset, off_t len) {
  (void)fd; (void)mode; (void)offset; (void)len;
  errno = EOPNOTSUPP;
  return -1;
}

int fallocate64(int fd, int mode, off_t offset, off_t len) { return fallocate(fd, mode, offset, len); }

int posix_fallocate(int fd, off_t offset, off_t len) {
  (void)fd; (void)offset; (void)len;
  return EOPNOTSUPP;
}

int posix_fallocate64(int fd, off_t offset, off_t len) { return posix_fallocate(fd, offset, len); }
