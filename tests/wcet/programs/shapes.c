/* Small control-flow shapes with known worst paths, for the WCET analyzer's tests
 * (tests/wcet/test_analyzer.py). Built at -O0 for the ARM7TDMI (ARM) and the
 * Cortex-M4 (Thumb-2), without a C library: -nostdlib -nostartfiles -e entry.
 * The tests find each loop by the line of its "for" (marked LOOP: name). */

volatile int sink;
int input[16];

int diamond(int x) {
    int r;
    if (x > 0) {          /* the longer arm */
        r = x * 3 + 1;
        sink = r;
        sink = r + x;
    } else {
        r = -x;
    }
    return r;
}

int nested(void) {
    int s = 0;
    for (int i = 0; i < 4; i++)            /* LOOP: nested_outer 4 */
        for (int j = 0; j < 3; j++)        /* LOOP: nested_inner 3 */
            s += input[i * 3 + j];
    return s;
}

int early_exit(void) {
    int i;
    for (i = 0; i < 10; i++) {             /* LOOP: early 10 */
        if (input[i] < 0)
            break;
        sink = input[i] * 2;
    }
    return i;
}

int calls_in_loop(void) {
    int s = 0;
    for (int i = 0; i < 5; i++)            /* LOOP: calls 5 */
        s += diamond(input[i]);
    return s;
}

int triangular(void) {
    int s = 0;
    for (int i = 0; i < 4; i++)            /* LOOP: tri_outer 4 */
        for (int j = 0; j <= i; j++)       /* LOOP: tri_inner 4 total 10 */
            s += input[j];
    return s;
}

int choose(int x) {
    if (x == 1)
        return 10;
    if (x == 2)
        return diamond(x) + nested();
    return early_exit();
}

static int twice(int x) { return 2 * x; }
static int square(int x) { return x * x * x + 1; }

int pointer_call(int x) {
    int (*f)(int) = x ? twice : square;
    return f(x);
}

int entry(void) {
    return nested() + early_exit() + calls_in_loop() + diamond(input[0]) + triangular() + choose(input[1]);
}

int recursive(int n) {
    return n > 0 ? n + recursive(n - 1) : 0;
}
