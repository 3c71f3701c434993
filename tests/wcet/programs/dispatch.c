/* A V1-like inference loop (ACETONE section 3.2, Listing 2): an array of layer structs, each calling its
 * layer function and its activation through function pointers. Integer arithmetic, so that the layer
 * functions' cost is all in their own code. probe(input, output) is the entry (Assay's driver calls it).
 * Call sequence per probe: layer_type = scale, copy, mix, copy, scale; actv = relu, identity, relu,
 * identity, identity. */
#define N 8

static int buf_a[N], buf_b[N];

static void copy(int *in, int *out) {
  for (int j = 0; j < 4; ++j) /* LOOP: copy 4 */
    out[j] = in[j];
}

static void scale(int *in, int *out) {
  for (int j = 0; j < N; ++j) /* LOOP: scale 8 */
    out[j] = in[j] * 3 + 1;
}

static void mix(int *in, int *out) {
  for (int j = 0; j < N; ++j) { /* LOOP: mix_outer 8 */
    int s = 0;
    for (int k = 0; k < N; ++k) /* LOOP: mix_inner 8 */
      s += in[k] * (j + k);
    out[j] = s > 0 ? s : -s;
  }
}

static void relu(int *x) {
  for (int j = 0; j < N; ++j) /* LOOP: relu 8 */
    if (x[j] < 0)
      x[j] = 0;
}

static void identity(int *x) { (void)x; }

struct Layer {
  void (*layer_type)(int *, int *);
  void (*actv)(int *);
};

static const struct Layer net[5] = {{scale, relu}, {copy, identity}, {mix, relu}, {copy, identity},
                                    {scale, identity}};

typedef unsigned __attribute__((may_alias)) word;

void probe(const float *input, float *output) {
  int *pre = buf_a, *cur = buf_b;
  for (int j = 0; j < N; ++j) /* LOOP: load 8 */
    pre[j] = (int)((const word *)input)[j] - 100;
  for (int i = 0; i < 5; ++i) { /* LOOP: layers 5 */
    net[i].layer_type(pre, cur); /* CALL: layer_type */
    net[i].actv(cur); /* CALL: actv */
    int *t = pre;
    pre = cur;
    cur = t;
  }
  for (int j = 0; j < N; ++j) /* LOOP: store 8 */
    ((word *)output)[j] = (word)pre[j];
}
