/* A switch compiled to a jump table (gcc: ARM ldrls pc / Thumb-2 tbb, tbh or ldr pc through adr), in code
 * that is otherwise straight-line: every path through probe is taken by some input, so the WCET must equal
 * the most cycles measured over all switch values. probe(input, output) is the entry; the input's first
 * word is the switch value, read as raw bits. Case 6 is long, so that Thumb-2 -O2 needs tbh. */
typedef unsigned __attribute__((may_alias)) word;

static volatile unsigned sink;

#define TEN(x) x; x; x; x; x; x; x; x; x; x

static unsigned select(unsigned x) {
  unsigned r;
  switch (x) {
  case 0: r = 11; break;
  case 1: r = x * 3 + 1; sink = r; break;
  case 2: r = 7; sink = 2; sink = 3; break;
  case 3: r = x - 9; break;
  case 4: r = 100; sink = r * 2; sink = r; sink = 1; break;
  case 5: r = 5; break;
  case 6: r = 66; TEN(TEN(sink = r)); TEN(TEN(sink = x)); TEN(TEN(sink = r + x)); break;
  case 8: r = 77; sink = 1; break;
  default: r = 12345;
  }
  return r;
}

void probe(const float *input, float *output) {
  ((word *)output)[0] = select(((const word *)input)[0]);
}
