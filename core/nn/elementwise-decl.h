/* elementwise-decl.h - prototypes of one width's kernels, named by the includer's EW(name)
 * (no include guard: included once per width). */
void EW(gelu)(float *out, const float *a, const float *b, size_t n);
void EW(silu)(float *out, const float *a, const float *b, size_t n);
void EW(silu_mul)(float *out, const float *a, const float *b, size_t n);
void EW(gelu_grad_acc)(float *dx, const float *dy, const float *x, size_t n);
void EW(silu_mul_grad_acc)(float *dgate, float *dup, const float *dy, const float *gate,
                           const float *up, size_t n);
void EW(exp_shift)(float *x, size_t n, float m);
