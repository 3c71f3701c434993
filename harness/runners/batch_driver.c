/* Assay batch driver (host).
 *
 * Runs the generated inference function on n inputs per call, so that the
 * Python and IPC cost is paid once per batch rather than once per input.
 * Compiled with -DASSAY_ENTRY=<symbol> -DASSAY_IN=<floats> -DASSAY_OUT=<floats>
 * taken from the generation manifest.
 */
#include <stddef.h>

void ASSAY_ENTRY(const float *input, float *output);
void assay_batch(const float *inputs, float *outputs, int n);

void assay_batch(const float *inputs, float *outputs, int n)
{
    for (int k = 0; k < n; ++k) {
        ASSAY_ENTRY(inputs + (size_t)k * ASSAY_IN, outputs + (size_t)k * ASSAY_OUT);
    }
}
