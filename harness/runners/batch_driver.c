/* Assay batch driver (host).
 *
 * Runs the generated inference function on n inputs per call, so that the
 * Python and IPC cost is paid once per batch rather than once per input.
 * Compiled with -DASSAY_ENTRY=<symbol> -DASSAY_IN=<floats> -DASSAY_OUT=<floats>
 * taken from the generation manifest.
 *
 * Every input is copied into a buffer with guard words around it, and the
 * entry writes into another (assay_guards.h); after each call the guards are
 * checked. assay_batch returns ASSAY_GUARD_INTACT, or the first damaged guard
 * with the index of the call that damaged it in *call (the outputs of the
 * calls before it are written).
 */
#include <stddef.h>
#include <string.h>

#include "assay_guards.h"

void ASSAY_ENTRY(const float *input, float *output);
int assay_batch(const float *inputs, float *outputs, int n, int *call);

int assay_batch(const float *inputs, float *outputs, int n, int *call)
{
    assay_guards_arm();
    for (int k = 0; k < n; ++k) {
        memcpy(assay_input.data, inputs + (size_t)k * ASSAY_IN, sizeof assay_input.data);
        /* the caller's outputs start as NaN: what the entry does not write stays NaN */
        memcpy(assay_output.data, outputs + (size_t)k * ASSAY_OUT, sizeof assay_output.data);
        ASSAY_ENTRY(assay_input.data, assay_output.data);
        int damaged = assay_guards_damaged();
        if (damaged != ASSAY_GUARD_INTACT) {
            *call = k;
            return damaged;
        }
        memcpy(outputs + (size_t)k * ASSAY_OUT, assay_output.data, sizeof assay_output.data);
    }
    return ASSAY_GUARD_INTACT;
}
