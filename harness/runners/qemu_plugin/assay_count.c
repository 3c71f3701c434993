/* assay_count: a QEMU TCG plugin that counts the instructions a program
 * executes inside one function (the inference entry), per call and per
 * "bucket" (a layer of the generated code), for harness/measurement/execcount.py.
 *
 * Built at set-up (or on first use) as a host shared library and loaded with
 *   qemu-arm|qemu-system-arm ... -plugin assay_count.so,map=MAP,out=OUT
 *
 * MAP (text, written by harness/measurement/execcount.py):
 *   entry ADDR            first instruction of an entry function (one line per entry: parallel code
 *                         has one function per core)
 *   buckets N             bucket numbers are 0 .. N-1
 *   range START END B     instructions in [START, END) belong to bucket B
 *   dispatch ADDR N B0 .. B(N-1)   (optional, once) the call instruction at ADDR
 *                         belongs, at its k-th execution in a call of the entry,
 *                         to bucket Bk (a generic inference loop calling one
 *                         shared layer function per layer: the k-th call runs
 *                         layer k, whatever the function's address)
 * Addresses are hexadecimal, without the Thumb bit. An instruction in no range
 * (C library, libgcc, a shared layer library) belongs to no bucket: it is
 * counted in the bucket of the last instruction executed that had one, i.e.
 * the code that called it (for a dispatch call, the layer of that execution).
 *
 * OUT (text), one block per call of an entry, written when the call returns:
 *   I K V                 call number K (0, 1, ... per vCPU) of vCPU V
 *   D ID N ADDR...        definition of segment ID: N instructions at these addresses
 *                         (printed once, before the first C line that names ID)
 *   C ID B COUNT JUMPS    segment ID ran COUNT times in bucket B; after JUMPS of those
 *                         runs the next instruction executed was not the one after
 *                         the segment's last instruction (a taken branch or a return)
 *   E K V                 call K of vCPU V returned
 * and at exit "X incomplete" if the program ended inside a call, or
 * "X error TEXT" if the counts cannot be trusted.
 *
 * Why the counts are exact. QEMU translates guest code into translation blocks
 * (TBs): straight-line runs that end at a branch (or a page or length limit).
 * At translation time this plugin cuts every TB into segments: a new segment
 * starts at the TB's first instruction, wherever the bucket changes, and at
 * the entry address. A segment is executed either completely or not at all
 * (a TB is left early only on an exception, and the inference code raises
 * none), so one callback on its first instruction, run just before that
 * instruction, counts all of its instructions. TBs may overlap (a branch into
 * the middle of code that is already translated starts a new TB) and may be
 * translated again after a flush (for megabytes of straight-line code,
 * qemu-arm's 128 MiB code buffer fills at every call); a translation whose
 * segment has the same instructions and bucket as one seen before reuses it,
 * so memory follows the code, not the number of translations. The harness
 * adds counts per address, so overlaps do not matter.
 *
 * Calls: the entry starts when a segment starting at the entry address runs
 * outside a call; the return address is the address following the last
 * instruction executed before it (the call instruction: BL, BLX, or ARMv4T's
 * "mov lr, pc; bx rN"). The call ends when a segment starting at that return
 * address runs. The call instruction itself is not counted; the entry's
 * return instruction is.
 *
 * Several vCPUs (bare-metal SMP, one inference function per core): every
 * vCPU has its own call state and its own counts (callbacks receive the vCPU
 * index), so each core's calls are counted apart. The state is not locked:
 * the harness runs SMP guests with "-accel tcg,thread=single", which executes
 * the vCPUs one after another in one host thread (qemu-arm runs one guest
 * thread anyway). At most MAX_VCPUS vCPUs.
 *
 * No QEMU header is needed: the few declarations of QEMU's plugin API
 * (version 1, QEMU 4.2 to 8.1; include/qemu/qemu-plugin.h) are repeated
 * below. Debian does not ship that header.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU plugin API, version 1 (the subset used here) ---- */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* not read */
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

/* ---- configuration ---- */
#define NO_BUCKET (-1)
#define MAX_VCPUS 8
#define MAX_ENTRIES 16

struct range {
    uint64_t start, end;
    int bucket;
};

static struct range *ranges;
static size_t n_ranges;
static int n_buckets;
static uint64_t entries[MAX_ENTRIES];
static int n_entries;
static uint64_t dispatch_addr;
static int have_dispatch;
static int *dispatch_buckets;
static unsigned n_dispatch; /* length of the dispatch sequence */
static FILE *out;

/* ---- segments ---- */
/* Counts of one segment in one bucket on one vCPU. A segment usually runs in
 * one bucket on one vCPU, so its cells are a short list rather than an array
 * sized MAX_VCPUS x buckets: memory follows what is reported. */
struct cell {
    struct cell *next_in_segment;
    struct cell *next_touched; /* on the vCPU's touched list while count != 0 */
    struct segment *segment;
    uint64_t count, jumps;
    unsigned vcpu;
    int bucket;
};

struct segment {
    uint64_t first;   /* address of the first instruction */
    uint64_t next;    /* address after the last instruction: where execution falls through */
    int bucket;       /* fixed bucket, or NO_BUCKET: counted in the caller's */
    unsigned id;
    unsigned n;
    int defined;      /* D line printed */
    uint64_t *addrs;  /* n instruction addresses */
    struct cell *cells;
    struct segment *next_in_table;
};

/* Every distinct segment, by first address. QEMU translates code again after
 * its code buffer fills (qemu-arm's is 128 MiB), which for megabytes of
 * straight-line code happens at every call; the same segment is then reused,
 * so memory follows the code, not the number of translations. */
static struct segment **table;
static size_t table_size; /* a power of two */
static unsigned n_segments;

/* ---- execution state, per vCPU ---- */
struct vcpu {
    int active;                     /* inside a call of an entry */
    uint64_t return_addr;
    uint64_t calls;
    int current_bucket;             /* bucket of the last instruction executed that has one */
    struct segment *previous;       /* segment executed last (any code) */
    struct cell *previous_cell;     /* where it was counted, NULL if not counted */
    struct cell *touched;           /* cells counted in the current call */
    unsigned dispatches;            /* executions of the dispatch call in the current call */
};
static struct vcpu vcpus[MAX_VCPUS];
static int failed;

static int is_entry(uint64_t addr)
{
    for (int i = 0; i < n_entries; ++i) {
        if (entries[i] == addr) {
            return 1;
        }
    }
    return 0;
}

static int bucket_of(uint64_t addr)
{
    size_t lo = 0, hi = n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (addr < ranges[mid].start) {
            hi = mid;
        } else if (addr >= ranges[mid].end) {
            lo = mid + 1;
        } else {
            return ranges[mid].bucket;
        }
    }
    return NO_BUCKET;
}

static void fail(const char *message)
{
    if (!failed) {
        fprintf(out, "X error %s\n", message);
        failed = 1;
    }
}

static void end_call(unsigned v)
{
    struct vcpu *cpu = &vcpus[v];
    fprintf(out, "I %" PRIu64 " %u\n", cpu->calls, v);
    for (struct cell *c = cpu->touched; c != NULL; c = c->next_touched) {
        struct segment *s = c->segment;
        if (!s->defined) {
            fprintf(out, "D %u %u", s->id, s->n);
            for (unsigned i = 0; i < s->n; ++i) {
                fprintf(out, " %" PRIx64, s->addrs[i]);
            }
            fputc('\n', out);
            s->defined = 1;
        }
        fprintf(out, "C %u %d %" PRIu64 " %" PRIu64 "\n", s->id, c->bucket, c->count, c->jumps);
        c->count = 0;
        c->jumps = 0;
    }
    cpu->touched = NULL;
    fprintf(out, "E %" PRIu64 " %u\n", cpu->calls, v);
    fflush(out);
    ++cpu->calls;
}

static void *allocate(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fail("out of memory");
        exit(1);
    }
    return p;
}

static struct cell *cell_of(struct segment *s, unsigned v, int b)
{
    struct cell *c;
    for (c = s->cells; c != NULL; c = c->next_in_segment) {
        if (c->vcpu == v && c->bucket == b) {
            return c;
        }
    }
    c = allocate(1, sizeof *c);
    c->segment = s;
    c->vcpu = v;
    c->bucket = b;
    c->next_in_segment = s->cells;
    s->cells = c;
    return c;
}

static void segment_exec(unsigned int vcpu_index, void *userdata)
{
    struct segment *s = userdata;
    if (vcpu_index >= MAX_VCPUS) {
        fail("more vCPUs than MAX_VCPUS");
        return;
    }
    struct vcpu *cpu = &vcpus[vcpu_index];
    if (cpu->previous_cell != NULL && s->first != cpu->previous->next) {
        ++cpu->previous_cell->jumps;
    }
    if (!cpu->active) {
        if (is_entry(s->first)) {
            if (cpu->previous == NULL) {
                fail("entry reached before any other code");
                return;
            }
            cpu->active = 1;
            cpu->return_addr = cpu->previous->next;
            cpu->current_bucket = 0;
            cpu->dispatches = 0;
        }
    } else if (s->first == cpu->return_addr) {
        end_call(vcpu_index);
        cpu->active = 0;
    } else if (cpu->return_addr > s->first && cpu->return_addr < s->next) {
        fail("return address inside a segment");
    }
    cpu->previous = s;
    cpu->previous_cell = NULL;
    if (!cpu->active) {
        return;
    }
    int b = s->bucket == NO_BUCKET ? cpu->current_bucket : s->bucket;
    if (have_dispatch && s->first == dispatch_addr) {
        if (cpu->dispatches >= n_dispatch) {
            fail("the dispatch call ran more often than its sequence is long");
            return;
        }
        b = dispatch_buckets[cpu->dispatches++];
    }
    struct cell *c = cell_of(s, vcpu_index, b);
    if (c->count++ == 0) {
        c->next_touched = cpu->touched;
        cpu->touched = c;
    }
    cpu->current_bucket = b;
    cpu->previous_cell = c;
}

static size_t slot_of(uint64_t first)
{
    return (size_t)((first >> 1) * UINT64_C(0x9E3779B97F4A7C15) >> 20) & (table_size - 1);
}

static void grow_table(void)
{
    struct segment **old = table;
    size_t old_size = table_size;
    table_size = old_size ? 2 * old_size : 4096;
    table = allocate(table_size, sizeof *table);
    for (size_t i = 0; i < old_size; ++i) {
        struct segment *s = old[i], *following;
        for (; s != NULL; s = following) {
            following = s->next_in_table;
            size_t k = slot_of(s->first);
            s->next_in_table = table[k];
            table[k] = s;
        }
    }
    free(old);
}

/* The segment with these instructions and this bucket, made on first sight. */
static struct segment *segment_for(const uint64_t *addrs, unsigned n, uint64_t next, int bucket)
{
    if (n_segments >= table_size) {
        grow_table();
    }
    size_t k = slot_of(addrs[0]);
    for (struct segment *s = table[k]; s != NULL; s = s->next_in_table) {
        if (s->first == addrs[0] && s->n == n && s->next == next && s->bucket == bucket
            && memcmp(s->addrs, addrs, n * sizeof *addrs) == 0) {
            return s;
        }
    }
    struct segment *s = allocate(1, sizeof *s);
    s->addrs = allocate(n, sizeof *s->addrs);
    memcpy(s->addrs, addrs, n * sizeof *addrs);
    s->first = addrs[0];
    s->next = next;
    s->n = n;
    s->bucket = bucket;
    s->id = n_segments++;
    s->next_in_table = table[k];
    table[k] = s;
    return s;
}

static void add_segment(struct qemu_plugin_tb *tb, size_t from, size_t to, int bucket)
{
    static uint64_t *addrs;
    static size_t capacity;
    if (to - from > capacity) {
        free(addrs);
        capacity = to - from;
        addrs = allocate(capacity, sizeof *addrs);
    }
    for (size_t i = from; i < to; ++i) {
        addrs[i - from] = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
    }
    struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, to - 1);
    struct segment *s = segment_for(addrs, (unsigned)(to - from),
                                    qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last), bucket);
    qemu_plugin_register_vcpu_insn_exec_cb(qemu_plugin_tb_get_insn(tb, from), segment_exec,
                                           QEMU_PLUGIN_CB_NO_REGS, s);
}

static void tb_translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    size_t start = 0;
    int bucket = NO_BUCKET;
    (void)id;
    for (size_t i = 0; i < n; ++i) {
        uint64_t addr = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
        int b = bucket_of(addr);
        if (i == 0) {
            bucket = b;
        } else if (b != bucket || is_entry(addr) || (have_dispatch && addr == dispatch_addr)) {
            add_segment(tb, start, i, bucket);
            start = i;
            bucket = b;
        }
    }
    if (n > 0) {
        add_segment(tb, start, n, bucket);
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    for (int v = 0; v < MAX_VCPUS; ++v) {
        if (vcpus[v].active) {
            fprintf(out, "X incomplete\n");
            break;
        }
    }
    fclose(out);
}

static int compare_ranges(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int read_map(const char *path)
{
    FILE *map = fopen(path, "r");
    char key[16];
    size_t capacity = 0;
    if (map == NULL) {
        fprintf(stderr, "assay_count: cannot open map %s\n", path);
        return -1;
    }
    while (fscanf(map, "%15s", key) == 1) {
        if (strcmp(key, "entry") == 0) {
            if (n_entries == MAX_ENTRIES || fscanf(map, "%" SCNx64, &entries[n_entries]) != 1) break;
            ++n_entries;
        } else if (strcmp(key, "buckets") == 0) {
            if (fscanf(map, "%d", &n_buckets) != 1) break;
        } else if (strcmp(key, "range") == 0) {
            struct range r;
            if (fscanf(map, "%" SCNx64 " %" SCNx64 " %d", &r.start, &r.end, &r.bucket) != 3) break;
            if (n_ranges == capacity) {
                capacity = capacity ? 2 * capacity : 64;
                ranges = realloc(ranges, capacity * sizeof *ranges);
                if (ranges == NULL) break;
            }
            ranges[n_ranges++] = r;
        } else if (strcmp(key, "dispatch") == 0 && !have_dispatch) {
            if (fscanf(map, "%" SCNx64 " %u", &dispatch_addr, &n_dispatch) != 2 || n_dispatch == 0) break;
            dispatch_buckets = calloc(n_dispatch, sizeof *dispatch_buckets);
            if (dispatch_buckets == NULL) break;
            unsigned k = 0;
            while (k < n_dispatch && fscanf(map, "%d", &dispatch_buckets[k]) == 1) {
                ++k;
            }
            if (k != n_dispatch) break;
            have_dispatch = 1;
        } else {
            break;
        }
    }
    int complete = feof(map);
    fclose(map);
    if (!complete || n_entries == 0 || n_buckets <= 0) {
        fprintf(stderr, "assay_count: malformed map %s\n", path);
        return -1;
    }
    for (unsigned k = 0; k < n_dispatch; ++k) {
        if (dispatch_buckets[k] < 0 || dispatch_buckets[k] >= n_buckets) {
            fprintf(stderr, "assay_count: dispatch bucket out of range in %s\n", path);
            return -1;
        }
    }
    for (size_t i = 0; i < n_ranges; ++i) {
        if (ranges[i].bucket < 0 || ranges[i].bucket >= n_buckets) {
            fprintf(stderr, "assay_count: bucket out of range in %s\n", path);
            return -1;
        }
    }
    qsort(ranges, n_ranges, sizeof *ranges, compare_ranges);
    return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *map = NULL, *out_path = NULL;
    (void)info;
    for (int i = 0; i < argc; ++i) {
        if (strncmp(argv[i], "map=", 4) == 0) {
            map = argv[i] + 4;
        } else if (strncmp(argv[i], "out=", 4) == 0) {
            out_path = argv[i] + 4;
        } else {
            fprintf(stderr, "assay_count: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
    if (map == NULL || out_path == NULL) {
        fprintf(stderr, "assay_count: needs map=FILE and out=FILE\n");
        return -1;
    }
    if (read_map(map) != 0) {
        return -1;
    }
    out = fopen(out_path, "w");
    if (out == NULL) {
        fprintf(stderr, "assay_count: cannot write %s\n", out_path);
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_translated);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
