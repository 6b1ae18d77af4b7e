/* An allocator that leaves garbage behind: LD_PRELOAD'ed (with PYTHONMALLOC=malloc, so
 * Python's and NumPy's PyMem allocations come here), every malloc'ed block is filled with
 * 0xA5 bytes before it is handed out, as a block another library freed may hold. A
 * member a library forgets to initialise then reads as a non-canonical pointer, and a call
 * or a dereference through it crashes at once. calloc is left alone (it promises zeros). */
#define _GNU_SOURCE
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t size);

void *malloc(size_t size)
{
    void *p = __libc_malloc(size);
    if (p != NULL)
        memset(p, 0xA5, size);
    return p;
}
