/* A switch statement compiled to a jump table (arm7tdmi -O0: cmp r3, #7; ldrls pc, [pc, r3, lsl #2]),
 * called from two counted loops, for the flow-fact location tests (tests/wcet/test_ffformat_locations.py):
 * the jump is bounded by a multibranch fact written with every address form, the loops by address, label
 * and offset, or source line. entry(input) is the analysed function. */
static volatile int sink;

static int classify(int v) {
  int r;
  switch (v) {
  case 0: r = 3; break;
  case 1: r = v * 7; sink = r; break;
  case 2: r = 1; sink = 2; sink = 3; break;
  case 3: r = v - 9; sink = r; sink = r + 1; sink = r + 2; sink = r + 3; break;
  case 4: r = 100; sink = r * 2; break;
  case 5: r = 5; sink = 5; sink = 6; sink = 7; sink = 8; sink = 9; sink = 10; sink = 11; sink = 12; break;
  case 7: r = 77; break;
  default: r = 0;
  }
  return r;
}

int entry(const int *input) {
  int total = 0;
  for (int i = 0; i < 10; i++) { /* LOOP: outer 10 */
    total += classify(input[i] & 7);
    for (int j = 0; j < 3; j++) /* LOOP: inner 3 */
      sink = total + j;
  }
  return total;
}
