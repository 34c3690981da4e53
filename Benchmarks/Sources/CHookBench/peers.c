#define _GNU_SOURCE  // pipe2

#include "CHookBench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int hb_peer_start(char *const *arguments, hb_peer *peer) {
    // Yama's mode 1 lets only ancestors trace a process; frida attaches from a child.
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    // A peer that dies must become an error on write, not end the benchmark.
    signal(SIGPIPE, SIG_IGN);
    int to[2];
    int from[2];
    if (pipe2(to, O_CLOEXEC) != 0) return errno;
    if (pipe2(from, O_CLOEXEC) != 0) {
        int error = errno;
        close(to[0]);
        close(to[1]);
        return error;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from[1], STDOUT_FILENO);
    pid_t pid = 0;
    int error = posix_spawnp(&pid, arguments[0], &actions, NULL, arguments, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to[0]);
    close(from[1]);
    if (error != 0) {
        close(to[1]);
        close(from[0]);
        return error;
    }
    *peer = (hb_peer){ pid, to[1], from[0] };
    return 0;
}

static int hb_write_all(int fd, const char *bytes, size_t count) {
    while (count > 0) {
        ssize_t written = write(fd, bytes, count);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return -1;
        bytes += written;
        count -= (size_t)written;
    }
    return 0;
}

long hb_peer_exchange(hb_peer *peer, const char *line, char *answer, long capacity) {
    if (line != NULL) {
        if (hb_write_all(peer->to, line, strlen(line)) != 0 || hb_write_all(peer->to, "\n", 1) != 0) return -1;
    }
    long length = 0;
    for (;;) {
        char byte;
        ssize_t got = read(peer->from, &byte, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        if (byte == '\n') break;
        if (length < capacity - 1) answer[length++] = byte;
    }
    answer[length] = 0;
    return length;
}

int hb_peer_finish(hb_peer *peer) {
    close(peer->to);
    int status = 0;
    while (waitpid(peer->pid, &status, 0) < 0 && errno == EINTR) {}
    close(peer->from);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
