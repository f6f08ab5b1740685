// A census of a process's live heap blocks, by allocation stack and by the block's first word
// (a Swift object's type metadata), for the soak (docs/performance.md, "Soak"): valgrind 3.19
// does not start the Swift 6.3 runtime, and heaptrack is not installed.
//
//   cc -O2 -shared -fPIC -o census.so Tools/soak/census.c -ldl -lpthread
//   CENSUS_DIR=/tmp/census LD_PRELOAD=$PWD/census.so ble-hci ... &
//   echo LABEL > /tmp/census/request   # → /tmp/census/census-LABEL.txt, then request is removed
//
// Every malloc/calloc/realloc/memalign/posix_memalign/aligned_alloc is recorded with its
// backtrace (12 frames) until it is freed. A dump lists, for each (stack, first word) with live
// blocks, the count and bytes; the frames as MODULE+OFFSET (symbolize with llvm-symbolizer,
// which reads the static symbol table dladdr cannot see) and the first word as
// MODULE+OFFSET when it points into a loaded image (a type's metadata), else "heap" (metadata
// instantiated at run time, or not an object). Blocks allocated by the dump itself or by the
// unwinder are not recorded.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define FRAMES 12
#define SKIP 2  /* record() and the hook */
#define LIVE_BITS 21
#define STACK_BITS 17

struct live { uintptr_t ptr; uint32_t stack; uint32_t size; };
struct stack { uint64_t hash; uint32_t depth; void *frames[FRAMES]; };

static struct live *live;      /* open addressing, linear probing, backward-shift deletion */
static struct stack *stacks;
static uint32_t nstacks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int busy;      /* inside a hook or the dump: pass through, record nothing */
static int ready;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint32_t stack_id(void **frames, int depth) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < depth; i++) h = mix(h ^ (uintptr_t)frames[i]);
    uint32_t mask = (1u << STACK_BITS) - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (i == 0) continue;
        struct stack *s = &stacks[i];
        if (s->depth == 0) {
            if (nstacks + 1 >= mask) return 0;  /* full: slot 0 stands for "unknown" */
            s->hash = h; s->depth = (uint32_t)depth;
            memcpy(s->frames, frames, sizeof(void *) * (size_t)depth);
            nstacks++;
            return i;
        }
        if (s->hash == h && s->depth == (uint32_t)depth
            && memcmp(s->frames, frames, sizeof(void *) * (size_t)depth) == 0) return i;
    }
}

static void insert(uintptr_t p, size_t size, uint32_t stack) {
    uint32_t mask = (1u << LIVE_BITS) - 1;
    for (uint32_t i = (uint32_t)mix(p) & mask;; i = (i + 1) & mask) {
        if (live[i].ptr == 0 || live[i].ptr == p) {
            live[i].ptr = p; live[i].size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
            live[i].stack = stack;
            return;
        }
    }
}

static void erase(uintptr_t p) {
    uint32_t mask = (1u << LIVE_BITS) - 1;
    uint32_t i = (uint32_t)mix(p) & mask;
    while (live[i].ptr != p) {
        if (live[i].ptr == 0) return;  /* not recorded */
        i = (i + 1) & mask;
    }
    for (uint32_t j = i;;) {  /* backward shift */
        live[i].ptr = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (live[j].ptr == 0) return;
            uint32_t home = (uint32_t)mix(live[j].ptr) & mask;
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        live[i] = live[j];
        i = j;
    }
}

__attribute__((noinline)) static void record(void *p, size_t size) {
    if (!p || !ready) return;
    void *frames[FRAMES + SKIP];
    int depth = backtrace(frames, FRAMES + SKIP) - SKIP;
    if (depth < 1) return;
    pthread_mutex_lock(&lock);
    insert((uintptr_t)p, size, stack_id(frames + SKIP, depth));
    pthread_mutex_unlock(&lock);
}

static void forget(void *p) {
    if (!p || !ready) return;
    pthread_mutex_lock(&lock);
    erase((uintptr_t)p);
    pthread_mutex_unlock(&lock);
}

#define HOOK(call, record_size) do { \
    if (busy) { return call; } \
    busy = 1; \
    void *r = call; \
    record(r, record_size); \
    busy = 0; \
    return r; \
} while (0)

void *malloc(size_t n) { HOOK(__libc_malloc(n), n); }
void *calloc(size_t a, size_t b) { HOOK(__libc_calloc(a, b), a * b); }
void *memalign(size_t al, size_t n) { HOOK(__libc_memalign(al, n), n); }
void *aligned_alloc(size_t al, size_t n) { HOOK(__libc_memalign(al, n), n); }
void *valloc(size_t n) { HOOK(__libc_memalign((size_t)sysconf(_SC_PAGESIZE), n), n); }
void free(void *p) {
    if (!busy) { busy = 1; forget(p); busy = 0; }
    __libc_free(p);
}
void *realloc(void *p, size_t n) {
    if (busy) return __libc_realloc(p, n);
    busy = 1; forget(p);
    void *r = __libc_realloc(p, n);
    record(r ? r : (n ? p : NULL), n);  /* failed: the old block lives on */
    busy = 0;
    return r;
}
int posix_memalign(void **out, size_t al, size_t n) {
    void *r = __libc_memalign(al, n);
    if (!r) return ENOMEM;
    if (!busy) { busy = 1; record(r, n); busy = 0; }
    *out = r;
    return 0;
}

struct group { uint32_t stack; uintptr_t word; uint64_t count, bytes; };
struct range { uintptr_t start, end; };

/* File-backed mappings (images) now: a first word inside one is a type's metadata or a vtable. */
static size_t images(struct range *out, size_t max) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    size_t n = 0;
    char line[4096];
    while (n < max && fgets(line, sizeof line, f)) {
        unsigned long a, b, inode;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %*s %*s %lu", &a, &b, perms, &inode) == 4 && inode != 0) {
            out[n].start = a; out[n].end = b; n++;
        }
    }
    fclose(f);
    return n;
}

static int in_image(const struct range *r, size_t n, uintptr_t w) {
    for (size_t i = 0; i < n; i++) if (w >= r[i].start && w < r[i].end) return 1;
    return 0;
}

static int by_bytes(const void *a, const void *b) {
    const struct group *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void where(FILE *f, uintptr_t address) {
    Dl_info info;
    if (dladdr((void *)address, &info) && info.dli_fname) {
        const char *name = strrchr(info.dli_fname, '/');
        fprintf(f, "%s+0x%lx", name ? name + 1 : info.dli_fname,
                (unsigned long)(address - (uintptr_t)info.dli_fbase));
    } else {
        fprintf(f, "heap");
    }
}

static void dump(const char *dir, const char *label) {
    /* Group under the lock into a private map (no malloc), write after. */
    size_t cap = (size_t)1 << LIVE_BITS;
    struct group *groups = mmap(NULL, cap * sizeof *groups, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (groups == MAP_FAILED) return;
    static struct range ranges[4096];
    size_t nranges = images(ranges, 4096);
    size_t n = 0;
    uint64_t blocks = 0, bytes = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < cap; i++) {
        struct live *l = &live[i];
        if (!l->ptr) continue;
        uintptr_t word = l->size >= sizeof(uintptr_t) ? *(uintptr_t *)l->ptr : 0;
        if (!in_image(ranges, nranges, word)) word = 0;
        size_t g = (size_t)mix(((uint64_t)l->stack << 48) ^ word) & (cap - 1);
        while (groups[g].count && (groups[g].stack != l->stack || groups[g].word != word)) g = (g + 1) & (cap - 1);
        if (!groups[g].count) { groups[g].stack = l->stack; groups[g].word = word; n++; }
        groups[g].count++; groups[g].bytes += l->size;
        blocks++; bytes += l->size;
    }
    pthread_mutex_unlock(&lock);
    size_t k = 0;
    for (size_t g = 0; g < cap; g++) if (groups[g].count) groups[k++] = groups[g];
    qsort(groups, n, sizeof *groups, by_bytes);
    char path[4096];
    snprintf(path, sizeof path, "%s/census-%s.txt", dir, label);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# live blocks %lu bytes %lu groups %zu stacks %u\n",
                (unsigned long)blocks, (unsigned long)bytes, n, nstacks);
        for (size_t g = 0; g < n; g++) {
            fprintf(f, "%lu %lu word=", (unsigned long)groups[g].count, (unsigned long)groups[g].bytes);
            if (groups[g].word) where(f, groups[g].word); else fprintf(f, "-");
            fprintf(f, " stack=%u", groups[g].stack);
            struct stack *s = &stacks[groups[g].stack];
            for (uint32_t k = 0; k < s->depth; k++) { fputc(' ', f); where(f, (uintptr_t)s->frames[k]); }
            fputc('\n', f);
        }
        fclose(f);
    }
    munmap(groups, cap * sizeof *groups);
}

static void *watch(void *arg) {
    const char *dir = arg;
    busy = 1;  /* this thread's own allocations are not part of the census */
    char request[4096];
    snprintf(request, sizeof request, "%s/request", dir);
    for (;;) {
        FILE *f = fopen(request, "r");
        if (f) {
            char label[256] = "now";
            if (fscanf(f, "%255s", label) != 1) strcpy(label, "now");
            fclose(f);
            dump(dir, label);
            unlink(request);
        }
        usleep(100 * 1000);
    }
    return NULL;
}

__attribute__((constructor)) static void start(void) {
    const char *dir = getenv("CENSUS_DIR");
    if (!dir) return;
    busy = 1;
    live = mmap(NULL, sizeof(struct live) << LIVE_BITS, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    stacks = mmap(NULL, sizeof(struct stack) << STACK_BITS, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (live == MAP_FAILED || stacks == MAP_FAILED) { busy = 0; return; }
    void *warm[4];
    backtrace(warm, 4);  /* loads the unwinder now, not inside the first hook */
    pthread_t t;
    pthread_create(&t, NULL, watch, strdup(dir));
    pthread_detach(t);
    ready = 1;
    busy = 0;
}
