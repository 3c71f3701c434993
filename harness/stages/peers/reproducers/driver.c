/* Runs a generated network on a file of inputs (written by an Assay reproducer, docs/peers.md).
 *
 *   ./run inputs.bin outputs.bin N
 *
 * reads N inputs of IN_SIZE float32 each, calls the generator's entry (ENTRY_CALL, given with -D) once per
 * input and writes N x OUT_SIZE float32 outputs. Each output buffer is filled with NaN before the call, so an
 * output the generated code never writes shows as NaN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include ENTRY_HEADER

static float input[IN_SIZE];
static float output[OUT_SIZE];

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s inputs.bin outputs.bin N\n", argv[0]);
        return 2;
    }
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    long n = atol(argv[3]);
    if (!in || !out) {
        fprintf(stderr, "cannot open %s or %s\n", argv[1], argv[2]);
        return 2;
    }
    for (long k = 0; k < n; k++) {
        if (fread(input, sizeof(float), IN_SIZE, in) != IN_SIZE) {
            fprintf(stderr, "%s: input %ld is short\n", argv[1], k);
            return 2;
        }
        for (int i = 0; i < OUT_SIZE; i++) output[i] = NAN;
        ENTRY_CALL;
        fwrite(output, sizeof(float), OUT_SIZE, out);
        fflush(out);
    }
    fclose(out);
    fclose(in);
    return 0;
}
