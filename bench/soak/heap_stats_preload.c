// Malloc statistics of a running server, for soak investigations: preloaded, it appends glibc's
// mallinfo2() every 5 s to the file named by HEAP_STATS_OUT (one line: unix time, bytes the
// heaps hold from the system, bytes in mmapped chunks, bytes in use, bytes free inside the heaps).
// In-use bytes that grow tell live memory (a store filling, a leak) from allocator retention
// (free bytes that grow). Not linked into tachyon.
//
//   cc -O2 -shared -fPIC -o /tmp/heap_stats.so bench/soak/heap_stats_preload.c -lpthread
//   LD_PRELOAD=/tmp/heap_stats.so HEAP_STATS_OUT=/tmp/heap.log build/tachyon serve ...
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void* sample_forever(void* path) {
  // Signals stay with the server's threads: a SIGTERM delivered here would kill the process
  // instead of reaching the server's handler (it drains and exits 0).
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  for (;;) {
    sleep(5);
    struct mallinfo2 m = mallinfo2();
    FILE* f = fopen((const char*)path, "a");
    if (!f) continue;
    fprintf(f, "%ld arena=%zu hblkhd=%zu inuse=%zu free=%zu\n", (long)time(NULL), m.arena, m.hblkhd, m.uordblks,
            m.fordblks);
    fclose(f);
  }
  return NULL;
}

__attribute__((constructor)) static void start_sampling(void) {
  const char* path = getenv("HEAP_STATS_OUT");
  if (!path) return;
  sigset_t all, old;  // created with every signal blocked (its mask is inherited), then restored here
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_t thread;
  if (pthread_create(&thread, NULL, sample_forever, (void*)path) == 0) pthread_detach(thread);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}
