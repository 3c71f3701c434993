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
 *   -DASSAY_DELAYS: the delays of parallel_common.h before every layer and operator,
 *     seeded by $ASSAY_DELAY_SEED and the run.
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
#include "parallel_common.h"

void assay_batch(const float *inputs, float *outputs, int n);

struct job {
    int core;
    const float *input;
    float *output;
};

static void *run_core(void *argument)
{
    const struct job *job = argument;
    assay_functions[job->core](job->input, job->output);
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
#ifdef ASSAY_TRACE
        assay_reset_trace();
#endif
#ifdef ASSAY_DELAYS
        assay_seed_delays(seed, k);
#endif
        for (int c = 0; c < ASSAY_CORES; ++c) {
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
                assay_dump_trace(trace, k);
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
        assay_dump_trace(trace, k);
#endif
    }
#ifdef ASSAY_TRACE
    if (trace) {
        fclose(trace);
    }
#endif
}
