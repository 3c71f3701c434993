// Counted loops at -O0 for wcet.binloops: each extern "C" function is one case (tests/wcet/test_binloops.py).
#include <type_traits>

volatile int sink;
volatile int flag;
volatile int data[16];
int limit = 10;

extern "C" __attribute__((noinline)) void touch(int *p) { *p += sink; }
extern "C" __attribute__((noinline)) void look(const int *p) { sink = *p; }

template <int N> __attribute__((always_inline)) inline void kernel(volatile int *out)
{
    for (int i = 0; i < N; ++i)
        out[i & 15] += i;
}

__attribute__((always_inline)) inline void escaping_kernel(void)
{
    for (int i = 0; i < 3; ++i)
        touch(&i);
}

extern "C" void simple_for(void)
{
    for (int i = 0; i < 10; ++i)
        sink += i;
}

extern "C" void nested_for(void)
{
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 7; ++j)
            sink += i * j;
}

extern "C" void template_constant(void)
{
    for (int e = 0; e < std::integral_constant<int, 3>(); ++e)  // a call at -O0, as Aidge's n_pack<T>()
        sink += e;
}

extern "C" void inlined_twice(void)
{
    kernel<12>(data);
    kernel<5>(data);
}

extern "C" void escaping_twice(void)
{
    escaping_kernel();
    escaping_kernel();
}

extern "C" void unsigned_compare(void)
{
    for (unsigned u = 3; u <= 17; u += 2)
        sink += u;
}

extern "C" void step_two(void)
{
    for (int i = 0; i < 9; i += 2)
        sink += i;
}

extern "C" void call_inside(void)
{
    int other = 1;
    for (int i = 0; i < 6; ++i)
        look(&other);
}

extern "C" void written_in_body(void)
{
    for (int i = 0; i < 10; ++i)
        if (flag)
            i = 0;
}

extern "C" void address_passed(void)
{
    for (int i = 0; i < 10; ++i)
        touch(&i);
}

extern "C" void limit_from_memory(void)
{
    for (int i = 0; i < limit; ++i)
        sink += i;
}

extern "C" void data_dependent_while(void)
{
    int k = 0;
    while (data[k & 15] != 0)
        k++;
    sink = k;
}

extern "C" void decremented_in_branch(void)
{
    for (int i = 0; i < 10; ++i)
        if (flag)
            i--;
}

extern "C" void while_counted(void)
{
    int k = 2;
    while (k < 11) {
        sink += k;
        k += 3;
    }
}

extern "C" void member_counter(void)
{
    struct { int a; int i; } s = {0, 0};
    for (s.i = 0; s.i < 5; s.i++)
        touch(&s.a);
}

extern "C" void entry(void)
{
    simple_for();
    nested_for();
    template_constant();
    inlined_twice();
    escaping_twice();
    unsigned_compare();
    step_two();
    call_inside();
    written_in_body();
    address_passed();
    limit_from_memory();
    data_dependent_while();
    decremented_in_branch();
    while_counted();
    member_counter();
}
