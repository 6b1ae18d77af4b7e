/* Test kernels of tests/cuda/test_control_standin.py (compiled by the CUDA C emulator,
 * tests/doubles/cuda_emulation.h, and loaded into the driver stand-in). */
extern "C" __global__ void t_newton(double *x, const double *a, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.5 * (x[i] + a[i] / x[i]);
}
/* more[0] = whether some sample's |x^2 - a| is above tol (one thread) */
extern "C" __global__ void t_residual(const double *x, const double *a, double tol, int *more,
                                      long long n) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int m = 0;
    for (long long i = 0; i < n; ++i) {
        double r = x[i] * x[i] - a[i];
        if (r > tol || -r > tol) m = 1;
    }
    *more = m;
}
extern "C" __global__ void t_add(double *x, double v, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}
/* one thread: k[0] -= 1 */
extern "C" __global__ void t_dec(long long *k, long long n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) k[0] -= 1;
}
