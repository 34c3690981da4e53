#include "CHookSupport.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

/* syscall() is variadic, which Swift cannot call. */
int chooksupport_membarrier_register(void) {
    return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -1;
}

int chooksupport_membarrier(void) {
    return syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -1;
}
#else
int chooksupport_membarrier_register(void) { return -1; }
int chooksupport_membarrier(void) { return -1; }
#endif
