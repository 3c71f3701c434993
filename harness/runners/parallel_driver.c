/* Assay batch driver for parallel code on the host: one POSIX thread per core.
 *
 * The same interface as batch_driver.c (assay_batch), so the host worker runs
 * it unchanged. Each inference starts one thread per core function, all with
 * the same input and output, and joins them; a quick semantic check of the
 * generated synchronisation, not a timing platform.
 * Compiled with -DASSAY_HEADER=<generated header, quoted> -DASSAY_CORES=<n>
 * -DASSAY_FUNCTIONS=<f0,f1,...> -DASSAY_IN=<floats> -DASSAY_OUT=<floats>, and
 * optionally:
 *   -DASSAY_TRACE -DASSAY_TRACE_SYM=<prefix>trace -DASSAY_TRACE_COUNT=<prefix>trace_count
 *     -DASSAY_TRACE_LEN=<events per core>: after each inference, every core's events are
 *     appended to the file named by $ASSAY_TRACE_FILE as lines "run core word0 word1 word2";
 *   -DASSAY_DELAYS: assay_delay(core, event) spins a pseudo-random number of iterations
 *     (xorshift32 seeded by $ASSAY_DELAY_SEED, the core and the run) before every layer
 *     and operator: mostly up to 20,000, one time in eight up to 4,000,000.
 * A watchdog ($ASSAY_WATCHDOG seconds per inference, default 10) turns a deadlock into
 * exit status 5 after appending the hung run's partial trace and a line "hang <run>",
 * so the trace check can say which wait never ended.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <pthread.h>
#include <stddef.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include ASSAY_HEADER

void assay_batch(const float *inputs, float *outputs, int n);

typedef void (*core_function)(const float *input, float *output);
static const core_function functions[ASSAY_CORES] = {ASSAY_FUNCTIONS};

struct job {
    int core;
    const float *input;
    float *output;
};

#ifdef ASSAY_DELAYS
#define MAX_SPIN 20000u
#define LONG_SPIN 4000000u
static unsigned delay_state[ASSAY_CORES];

void assay_delay(int core, int event)
{
    unsigned x = delay_state[core] ^ (unsigned)(event * 2654435761u);
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    delay_state[core] = x ? x : 1u;
    /* mostly short, one in eight long (up to a few ms): long enough to reorder whole layers */
    const unsigned spins = (x & 7u) == 0u ? (x >> 3) % LONG_SPIN : (x >> 3) % MAX_SPIN;
    for (volatile unsigned spin = 0; spin < spins; ++spin) {
    }
}
#endif

#ifdef ASSAY_TRACE
static void dump_trace(FILE *trace, int k)
{
    if (!trace) {
        return;
    }
    for (int c = 0; c < ASSAY_CORES; ++c) {
        const unsigned logged = ASSAY_TRACE_COUNT[c];
        const unsigned count = logged < ASSAY_TRACE_LEN ? logged : ASSAY_TRACE_LEN;
        if (logged > ASSAY_TRACE_LEN) {
            fprintf(trace, "%d %d overflow %u\n", k, c, logged);
        }
        for (unsigned e = 0; e < count; ++e) {
            fprintf(trace, "%d %d %u %u %u\n", k, c, ASSAY_TRACE_SYM[c][e][0], ASSAY_TRACE_SYM[c][e][1],
                    ASSAY_TRACE_SYM[c][e][2]);
        }
    }
    fflush(trace);
}
#endif

static void *run_core(void *argument)
{
    const struct job *job = argument;
    functions[job->core](job->input, job->output);
    return NULL;
}

void assay_batch(const float *inputs, float *outputs, int n)
{
#ifdef ASSAY_TRACE
    const char *path = getenv("ASSAY_TRACE_FILE");
    FILE *trace = path ? fopen(path, "w") : NULL;
#endif
#ifdef ASSAY_DELAYS
    const char *seed_text = getenv("ASSAY_DELAY_SEED");
    const unsigned seed = seed_text ? (unsigned)strtoul(seed_text, NULL, 10) : 1u;
#endif
    const char *watchdog_text = getenv("ASSAY_WATCHDOG");
    const time_t watchdog = watchdog_text ? (time_t)strtol(watchdog_text, NULL, 10) : 10;
    for (int k = 0; k < n; ++k) {
        pthread_t threads[ASSAY_CORES];
        struct job jobs[ASSAY_CORES];
        for (int c = 0; c < ASSAY_CORES; ++c) {
#ifdef ASSAY_TRACE
            ASSAY_TRACE_COUNT[c] = 0;
#endif
#ifdef ASSAY_DELAYS
            delay_state[c] = (seed * 747796405u + (unsigned)c * 2891336453u + (unsigned)k * 277803737u) | 1u;
#endif
            jobs[c].core = c;
            jobs[c].input = inputs + (size_t)k * ASSAY_IN;
            jobs[c].output = outputs + (size_t)k * ASSAY_OUT;
        }
        for (int c = 0; c < ASSAY_CORES; ++c) {
            if (pthread_create(&threads[c], NULL, run_core, &jobs[c]) != 0) {
                fprintf(stderr, "pthread_create failed for core %d\n", c);
                exit(4);
            }
        }
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += watchdog;
        for (int c = 0; c < ASSAY_CORES; ++c) {
            if (pthread_timedjoin_np(threads[c], NULL, &deadline) != 0) {
#ifdef ASSAY_TRACE
                dump_trace(trace, k);
                if (trace) {
                    fprintf(trace, "hang %d\n", k);
                    fclose(trace);
                }
#endif
                fprintf(stderr, "inference %d did not finish within %ld s (core %d waits)\n", k, (long)watchdog, c);
                fflush(stderr);
                _exit(5);
            }
        }
#ifdef ASSAY_TRACE
        dump_trace(trace, k);
#endif
    }
#ifdef ASSAY_TRACE
    if (trace) {
        fclose(trace);
    }
#endif
}
