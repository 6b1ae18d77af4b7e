/* A machine with more CPUs than this one: LD_PRELOAD'ed into a test's subprocess, it
 * answers sysconf(_SC_NPROCESSORS_ONLN / _CONF) with EAGLE_FAKE_CPUS (so eagle allows
 * teams of 8 per CPU, up to 1024 threads) and passes every other name to libc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

long sysconf(int name)
{
    static long (*real)(int) = NULL;
    if (name == _SC_NPROCESSORS_ONLN || name == _SC_NPROCESSORS_CONF) {
        const char *n = getenv("EAGLE_FAKE_CPUS");
        if (n != NULL && atol(n) > 0)
            return atol(n);
    }
    if (real == NULL)
        real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    return real(name);
}
