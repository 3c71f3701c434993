/* What both drivers of parallel code share (parallel_driver.c on host threads, smp_driver.c on bare-metal
 * cores): the table of core functions, the injected delays and the trace dump. Included once, by the driver.
 *
 * Defines expected: ASSAY_HEADER (the generated header, quoted), ASSAY_CORES, ASSAY_FUNCTIONS (f0,f1,...);
 * with -DASSAY_TRACE also ASSAY_TRACE_SYM, ASSAY_TRACE_COUNT, ASSAY_TRACE_LEN (the manifest's names).
 */
#ifndef ASSAY_PARALLEL_COMMON_H
#define ASSAY_PARALLEL_COMMON_H

#include <stdio.h>
#include ASSAY_HEADER

typedef void (*assay_core_function)(const float *input, float *output);
static const assay_core_function assay_functions[ASSAY_CORES] = {ASSAY_FUNCTIONS};

#ifdef ASSAY_DELAYS
/* assay_delay(core, event), called by the generated code before every layer and operator: a pseudo-random
 * busy loop (xorshift32 per core, seeded per run by assay_seed_delays), mostly up to 20,000 iterations, one
 * time in eight up to 4,000,000: long enough to reorder whole layers between cores. */
#define ASSAY_SHORT_SPIN 20000u
#define ASSAY_LONG_SPIN 4000000u
static unsigned assay_delay_state[ASSAY_CORES];

void assay_delay(int core, int event)
{
    unsigned x = assay_delay_state[core] ^ (unsigned)((unsigned)event * 2654435761u);
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    assay_delay_state[core] = x ? x : 1u;
    const unsigned spins = (x & 7u) == 0u ? (x >> 3) % ASSAY_LONG_SPIN : (x >> 3) % ASSAY_SHORT_SPIN;
    for (volatile unsigned spin = 0; spin < spins; ++spin) {
    }
}

static void assay_seed_delays(unsigned seed, int run)
{
    for (int c = 0; c < ASSAY_CORES; ++c) {
        assay_delay_state[c] = (seed * 747796405u + (unsigned)c * 2891336453u + (unsigned)run * 277803737u) | 1u;
    }
}
#endif

#ifdef ASSAY_TRACE
static void assay_reset_trace(void)
{
    for (int c = 0; c < ASSAY_CORES; ++c) {
        ASSAY_TRACE_COUNT[c] = 0;
    }
}

/* Lines "run core word0 word1 word2" (harness/runners/parallel_host.py reads them), "run core overflow n"
 * when a core logged more than its buffer holds. */
static void assay_dump_trace(FILE *trace, int run)
{
    if (!trace) {
        return;
    }
    for (int c = 0; c < ASSAY_CORES; ++c) {
        const unsigned logged = ASSAY_TRACE_COUNT[c];
        const unsigned count = logged < ASSAY_TRACE_LEN ? logged : ASSAY_TRACE_LEN;
        if (logged > ASSAY_TRACE_LEN) {
            fprintf(trace, "%d %d overflow %u\n", run, c, logged);
        }
        for (unsigned e = 0; e < count; ++e) {
            fprintf(trace, "%d %d %u %u %u\n", run, c, ASSAY_TRACE_SYM[c][e][0], ASSAY_TRACE_SYM[c][e][1],
                    ASSAY_TRACE_SYM[c][e][2]);
        }
    }
    fflush(trace);
}
#endif

#endif /* ASSAY_PARALLEL_COMMON_H */
