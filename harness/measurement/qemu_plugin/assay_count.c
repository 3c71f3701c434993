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
 * translated again after a flush; each translation gets its own segments,
 * and the harness adds counts per address, so neither matters.
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
struct segment {
    uint64_t first;   /* address of the first instruction */
    uint64_t next;    /* address after the last instruction: where execution falls through */
    int bucket;       /* fixed bucket, or NO_BUCKET: counted in the caller's */
    unsigned id;
    unsigned n;
    int defined;      /* D line printed */
    int touched[MAX_VCPUS]; /* on that vCPU's touched list for its current call */
    uint64_t *addrs;  /* n instruction addresses */
    uint64_t *count;  /* per vCPU and bucket (vcpu * n_buckets + bucket), allocated on first use */
    uint64_t *jumps;
    struct segment *next_touched[MAX_VCPUS];
};

static unsigned n_segments;

/* ---- execution state, per vCPU ---- */
struct vcpu {
    int active;                     /* inside a call of an entry */
    uint64_t return_addr;
    uint64_t calls;
    int current_bucket;             /* bucket of the last instruction executed that has one */
    struct segment *previous;       /* segment executed last (any code) */
    int previous_counted_in;        /* bucket it was counted in, NO_BUCKET if not counted */
    struct segment *touched;
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
    struct segment *s;
    fprintf(out, "I %" PRIu64 " %u\n", cpu->calls, v);
    for (s = cpu->touched; s != NULL; s = s->next_touched[v]) {
        if (!s->defined) {
            fprintf(out, "D %u %u", s->id, s->n);
            for (unsigned i = 0; i < s->n; ++i) {
                fprintf(out, " %" PRIx64, s->addrs[i]);
            }
            fputc('\n', out);
            s->defined = 1;
        }
        uint64_t *count = s->count + (size_t)v * n_buckets, *jumps = s->jumps + (size_t)v * n_buckets;
        for (int b = 0; b < n_buckets; ++b) {
            if (count[b] != 0) {
                fprintf(out, "C %u %d %" PRIu64 " %" PRIu64 "\n", s->id, b, count[b], jumps[b]);
                count[b] = 0;
                jumps[b] = 0;
            }
        }
        s->touched[v] = 0;
    }
    cpu->touched = NULL;
    fprintf(out, "E %" PRIu64 " %u\n", cpu->calls, v);
    fflush(out);
    ++cpu->calls;
}

static void segment_exec(unsigned int vcpu_index, void *userdata)
{
    struct segment *s = userdata;
    if (vcpu_index >= MAX_VCPUS) {
        fail("more vCPUs than MAX_VCPUS");
        return;
    }
    struct vcpu *cpu = &vcpus[vcpu_index];
    if (cpu->previous_counted_in != NO_BUCKET && s->first != cpu->previous->next) {
        ++cpu->previous->jumps[(size_t)vcpu_index * n_buckets + cpu->previous_counted_in];
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
    cpu->previous_counted_in = NO_BUCKET;
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
    if (s->count == NULL) {
        s->count = calloc((size_t)MAX_VCPUS * n_buckets, sizeof *s->count);
        s->jumps = calloc((size_t)MAX_VCPUS * n_buckets, sizeof *s->jumps);
        if (s->count == NULL || s->jumps == NULL) {
            fail("out of memory");
            exit(1);
        }
    }
    s->count[(size_t)vcpu_index * n_buckets + b] += 1;
    if (!s->touched[vcpu_index]) {
        s->touched[vcpu_index] = 1;
        s->next_touched[vcpu_index] = cpu->touched;
        cpu->touched = s;
    }
    cpu->current_bucket = b;
    cpu->previous_counted_in = b;
}

static void add_segment(struct qemu_plugin_tb *tb, size_t from, size_t to, int bucket)
{
    struct segment *s = calloc(1, sizeof *s);
    if (s == NULL || (s->addrs = calloc(to - from, sizeof *s->addrs)) == NULL) {
        fail("out of memory");
        exit(1);
    }
    for (size_t i = from; i < to; ++i) {
        s->addrs[i - from] = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
    }
    struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, to - 1);
    s->first = s->addrs[0];
    s->next = qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last);
    s->n = (unsigned)(to - from);
    s->bucket = bucket;
    s->id = n_segments++;
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
    for (int v = 0; v < MAX_VCPUS; ++v) {
        vcpus[v].previous_counted_in = NO_BUCKET;
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
