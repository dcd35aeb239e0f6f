/* regularfile.h - open a file for reading only when it is a regular file.
 *
 * A FIFO without a writer blocks open(2), and a device such as /dev/zero never ends: a loader
 * that is handed either hangs or reads until memory runs out. cl_open_regular opens without
 * blocking, checks what was opened, and hands back a blocking descriptor of a regular file. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A read-only descriptor of path; else -1 when it cannot be opened (*why: g_strerror's text) or
 * -2 when it is a folder or not a regular file (*why: "is a folder", "is not a regular file
 * (a pipe, device or socket)", ...). */
static inline int cl_open_regular(const char *path, const char **why)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = g_strerror(errno);
        return -1;
    }
    struct stat sb;
    *why = NULL;
    if (fstat(fd, &sb) != 0)
        *why = "cannot be examined";
    else if (S_ISDIR(sb.st_mode))
        *why = "is a folder";
    else if (!S_ISREG(sb.st_mode))
        *why = "is not a regular file (a pipe, device or socket)";
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        *why = "cannot be read";
    if (*why) {
        close(fd);
        return -2;
    }
    return fd;
}
