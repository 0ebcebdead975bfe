/* Fast path of the lab's emulated tools: a read-only call costs what the real C tool costs.
 *
 * Installed on each node as /usr/local/sbin/<tool> (a link to this program; argv[0] names the tool).
 * Every read-only answer depends only on inputs this program can read in well under a millisecond:
 * the profile and live state files (their inode, size and mtime), the netdevs under the net sysfs
 * (mtu, operstate, carrier, address, ifindex), the addresses of every interface, the hostname, PATH,
 * and for lsmod /proc/modules. Those inputs, with the command line, form a key. Output kept under that
 * key is printed as it is; otherwise the Python emulation (the `labhw` package) runs, its output is
 * passed through, and, if it says the call may be kept (a "1" on the descriptor named by
 * FABNET_LAB_CACHE_FD) and the key is unchanged after the run, the output is kept for the next call.
 * Setters never say so, and each write they make changes the key, so state changes are seen at once.
 *
 * Build: cc -O2 -static -o labhw-run labhw-run.c (static: the node's C library may differ).
 * Environment: FABNET_LAB_HW_ROOT, FABNET_LAB_NET_SYSFS (as the Python side), FABNET_LAB_PYTHON and
 * FABNET_LAB_PACKAGE (where Python and the package are; defaults below).
 */
#define _GNU_SOURCE
/* A path longer than PATH_MAX cannot be opened anyway: truncated, it reads as missing, which is safe. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_ROOT "/var/lib/fabnet-lab"
#define DEFAULT_NET "/sys/class/net"
#define DEFAULT_PYTHON "/usr/bin/python3"
#define DEFAULT_PACKAGE "/usr/local/lib/fabnet-lab/labhw"
#define MAX_KEPT (1 << 20)
#define CACHE_FD 3
#define MAX_INPUT (32 * 1024) /* a batch on standard input: within a pipe's buffer, so writing it never waits */

struct buf {
    char *data;
    size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) exit(70);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* Command-line words: bytes outside [A-Za-z0-9._,=/:+-] as %XX, so the key is one printable line. */
static void put_word(struct buf *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._,=/:+-", c)) {
            put(b, (const char *)&c, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            put(b, esc, 3);
        }
    }
    put(b, " ", 1);
}

static void put_stat(struct buf *b, const char *path) {
    struct stat st;
    char line[128];
    if (stat(path, &st) != 0) {
        snprintf(line, sizeof line, " -");
    } else {
        snprintf(line, sizeof line, " %llu:%lld:%lld.%09ld", (unsigned long long)st.st_ino, (long long)st.st_size,
                 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    }
    puts_(b, line);
}

/* A small file's first line (sysfs attributes), or "-" when it cannot be read. */
static void put_attr(struct buf *b, const char *dir, const char *name, const char *attr) {
    char path[4096], text[256];
    snprintf(path, sizeof path, "%s/%s/%s", dir, name, attr);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0) close(fd);
    if (n < 0) n = 0, text[0] = '-', text[1] = 0, n = 1;
    text[n] = 0;
    text[strcspn(text, "\n")] = 0;
    put(b, " ", 1);
    puts_(b, text);
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int visible(const struct dirent *d) { return d->d_name[0] != '.'; }

/* stat() of every file in DIR (one level), sorted by name. */
static void put_dir_stats(struct buf *b, const char *dir) {
    struct dirent **list;
    int n = scandir(dir, &list, visible, by_name);
    put_stat(b, dir);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        puts_(b, " ");
        puts_(b, list[i]->d_name);
        put_stat(b, path);
        free(list[i]);
    }
    if (n >= 0) free(list);
}

static uint64_t fnv1a(const char *data, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)data[i]) * 1099511628211ULL;
    return h;
}

static void put_file_hash(struct buf *b, const char *path) {
    struct buf content = {0};
    char chunk[8192], line[40];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    while (fd >= 0 && (n = read(fd, chunk, sizeof chunk)) > 0) put(&content, chunk, (size_t)n);
    if (fd >= 0) close(fd);
    snprintf(line, sizeof line, " %016llx", (unsigned long long)fnv1a(content.data ? content.data : "", content.len));
    puts_(b, line);
    free(content.data);
}

static void build_key(struct buf *key, const char *tool, int argc, char **argv, const char *root, const char *net,
                      const struct buf *input) {
    char path[4096];
    struct utsname uts;
    key->len = 0;
    puts_(key, "labhw-run/1 ");
    put_word(key, tool);
    for (int i = 0; i < argc; i++) put_word(key, argv[i]);
    puts_(key, "|root ");
    put_word(key, root);
    puts_(key, "|net ");
    put_word(key, net);
    puts_(key, "|path ");
    put_word(key, getenv("PATH") ? getenv("PATH") : "");
    puts_(key, "|host ");
    put_word(key, uname(&uts) == 0 ? uts.nodename : "-");
    puts_(key, "|state");
    snprintf(path, sizeof path, "%s/hw.json", root);
    put_stat(key, path);
    snprintf(path, sizeof path, "%s/modules.json", root);
    put_stat(key, path);
    snprintf(path, sizeof path, "%s/qos", root);
    put_dir_stats(key, path);
    /* rdma_cm's default ToS files: sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos */
    snprintf(path, sizeof path, "%s/sys/kernel/config/rdma_cm", root);
    struct dirent **devs;
    int ndev = scandir(path, &devs, visible, by_name);
    for (int i = 0; i < ndev; i++) {
        char ports[4096];
        struct dirent **pl;
        snprintf(ports, sizeof ports, "%s/%s/ports", path, devs[i]->d_name);
        int np = scandir(ports, &pl, visible, by_name);
        for (int j = 0; j < np; j++) {
            char tos[8192];
            snprintf(tos, sizeof tos, "%s/%s/default_roce_tos", ports, pl[j]->d_name);
            puts_(key, " ");
            puts_(key, devs[i]->d_name);
            puts_(key, "/");
            puts_(key, pl[j]->d_name);
            put_stat(key, tos);
            free(pl[j]);
        }
        if (np >= 0) free(pl);
        free(devs[i]);
    }
    if (ndev >= 0) free(devs);
    puts_(key, "|net");
    struct dirent **links;
    int nl = scandir(net, &links, visible, by_name);
    static const char *attrs[] = {"mtu", "operstate", "carrier", "address", "ifindex"};
    for (int i = 0; i < nl; i++) {
        puts_(key, " ");
        puts_(key, links[i]->d_name);
        for (size_t a = 0; a < sizeof attrs / sizeof *attrs; a++) put_attr(key, net, links[i]->d_name, attrs[a]);
        puts_(key, ";");
        free(links[i]);
    }
    if (nl >= 0) free(links);
    puts_(key, "|addr");
    struct ifaddrs *ifas;
    if (getifaddrs(&ifas) == 0) {
        for (struct ifaddrs *ifa = ifas; ifa; ifa = ifa->ifa_next) {
            char text[INET6_ADDRSTRLEN] = "";
            if (!ifa->ifa_addr) continue;
            if (ifa->ifa_addr->sa_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)ifa->ifa_addr)->sin_addr, text, sizeof text);
            else if (ifa->ifa_addr->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr, text, sizeof text);
            else
                continue;
            puts_(key, " ");
            puts_(key, ifa->ifa_name);
            puts_(key, "=");
            puts_(key, text);
        }
        freeifaddrs(ifas);
    } else {
        puts_(key, " ?");
    }
    if (strcmp(tool, "lsmod") == 0) {
        puts_(key, "|modules");
        put_file_hash(key, "/proc/modules");
    }
    if (input) {
        puts_(key, "|stdin ");
        put_word(key, input->data ? input->data : "");
    }
}

/* `dcb -b -` (and its spellings) reads its commands from standard input: they are part of its answer. */
static int reads_stdin(const char *tool, int argc, char **argv) {
    if (strcmp(tool, "dcb") != 0) return 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : "";
        size_t n = strlen(a);
        if (strcmp(a, "--") == 0) return 0;
        if (strcmp(a, "--batch=-") == 0 || (strcmp(a, "--batch") == 0 && strcmp(next, "-") == 0)) return 1;
        if (n >= 2 && a[0] == '-' && a[1] != '-' && strchr(a, 'b') &&
            ((a[n - 1] == 'b' && strcmp(next, "-") == 0) || (n >= 3 && strcmp(a + n - 2, "b-") == 0)))
            return 1;
    }
    return 0;
}

static int write_all(int fd, const char *data, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Print kept output for KEY if there is any; returns 1 when it did. */
static int answer_from_cache(const char *file, const struct buf *key) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct buf kept = {0};
    char chunk[16384];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) put(&kept, chunk, (size_t)n);
    close(fd);
    int hit = n == 0 && kept.len > key->len && memcmp(kept.data, key->data, key->len) == 0 &&
              kept.data[key->len] == '\n';
    if (hit && write_all(1, kept.data + key->len + 1, kept.len - key->len - 1) != 0 && errno != EPIPE) hit = 0;
    free(kept.data);
    return hit;
}

static void keep(const char *root, const char *file, const struct buf *key, const struct buf *out) {
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s/cache", root);
    mkdir(dir, 0755);
    snprintf(tmp, sizeof tmp, "%s/.tmp.%ld", dir, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int ok = write_all(fd, key->data, key->len) == 0 && write_all(fd, "\n", 1) == 0 &&
             write_all(fd, out->data ? out->data : "", out->len) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok || rename(tmp, file) != 0) unlink(tmp);
}

static const char *env_or(const char *name, const char *fallback) {
    const char *value = getenv(name);
    return value && *value ? value : fallback;
}

static void exec_python(const char *tool, int argc, char **argv) {
    char **args = calloc((size_t)argc + 7, sizeof *args);
    if (!args) exit(70);
    int i = 0;
    args[i++] = (char *)env_or("FABNET_LAB_PYTHON", DEFAULT_PYTHON);
    args[i++] = "-I";
    args[i++] = "-S";
    args[i++] = (char *)env_or("FABNET_LAB_PACKAGE", DEFAULT_PACKAGE);
    args[i++] = "--as";
    args[i++] = (char *)tool;
    for (int j = 0; j < argc; j++) args[i++] = argv[j];
    args[i] = NULL;
    execv(args[0], args);
    fprintf(stderr, "%s: fabnet lab emulation: cannot run %s: %s\n", tool, args[0], strerror(errno));
    exit(127);
}

int main(int argc, char **argv) {
    const char *tool = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    argc--, argv++;
    if (argc >= 2 && strcmp(argv[0], "--as") == 0) tool = argv[1], argc -= 2, argv += 2;
    /* Setters and Python-priced tools go straight to Python. */
    if (strcmp(tool, "mlnx_qos") == 0 || strcmp(tool, "modprobe") == 0 || strcmp(tool, "fabnet-lab-init") == 0 ||
        (argc > 0 && strcmp(argv[0], "--lab-info") == 0))
        exec_python(tool, argc, argv);

    const char *root = env_or("FABNET_LAB_HW_ROOT", DEFAULT_ROOT);
    const char *net = env_or("FABNET_LAB_NET_SYSFS", DEFAULT_NET);
    /* A batch on standard input is read here, whole, into the key; Python gets it from a pipe. */
    struct buf input = {0}, *stdin_input = NULL;
    if (reads_stdin(tool, argc, argv)) {
        char chunk[4096];
        ssize_t got;
        stdin_input = &input;
        put(&input, "", 0);
        while ((got = read(0, chunk, sizeof chunk)) != 0) {
            if (got < 0 && errno == EINTR) continue;
            if (got < 0 || input.len + (size_t)got > MAX_INPUT) {
                fprintf(stderr, "%s: fabnet lab emulation: a batch on standard input must be a readable %d KiB "
                        "at most\n", tool, MAX_INPUT / 1024);
                return 1;
            }
            put(&input, chunk, (size_t)got);
        }
    }
    struct buf key = {0};
    char file[4200];
    build_key(&key, tool, argc, argv, root, net, stdin_input);
    snprintf(file, sizeof file, "%s/cache/%016llx", root, (unsigned long long)fnv1a(key.data, key.len));
    if (answer_from_cache(file, &key)) return 0;

    int out[2], mark[2], in[2] = {-1, -1};
    if (stdin_input && pipe2(in, O_CLOEXEC) != 0) return 70;
    if (pipe2(out, O_CLOEXEC) != 0 || pipe(mark) != 0) {
        if (stdin_input) return 70;  /* its input is read already: Python alone would find none */
        exec_python(tool, argc, argv);
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        if (stdin_input) return 70;
        exec_python(tool, argc, argv);
    }
    if (child == 0) {
        close(mark[0]);
        /* Standard input first: the input pipe may hold the descriptor number CACHE_FD is about to take. */
        if (stdin_input && dup2(in[0], 0) < 0) _exit(70);
        if (dup2(out[1], 1) < 0 || (mark[1] != CACHE_FD && dup2(mark[1], CACHE_FD) < 0)) _exit(70);
        if (mark[1] != CACHE_FD) close(mark[1]);
        setenv("FABNET_LAB_CACHE_FD", "3", 1);
        /* Python may say "keep" for a batch on stdin only when the key holds it. */
        if (stdin_input) setenv("FABNET_LAB_STDIN_KEYED", "1", 1);
        exec_python(tool, argc, argv);
    }
    if (stdin_input) {
        close(in[0]);
        signal(SIGPIPE, SIG_IGN);
        write_all(in[1], input.data, input.len);  /* at most MAX_INPUT: within a pipe's buffer */
        close(in[1]);
    }
    close(out[1]);
    close(mark[1]);
    signal(SIGPIPE, SIG_IGN);
    struct buf captured = {0};
    int keepable = 1, forwarding = 1;
    char chunk[16384];
    ssize_t n;
    for (;;) {
        n = read(out[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (forwarding && write_all(1, chunk, (size_t)n) != 0) forwarding = keepable = 0;
        if (keepable && captured.len + (size_t)n <= MAX_KEPT) put(&captured, chunk, (size_t)n);
        else keepable = 0;
    }
    char said = 0;
    while ((n = read(mark[0], &said, 1)) < 0 && errno == EINTR) {
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    int code = WEXITSTATUS(status);
    if (code == 0 && keepable && n == 1 && said == '1') {
        struct buf again = {0};
        build_key(&again, tool, argc, argv, root, net, stdin_input);
        /* Inputs that changed while Python ran could have produced output for neither key: keep nothing. */
        if (again.len == key.len && memcmp(again.data, key.data, key.len) == 0) keep(root, file, &key, &captured);
        free(again.data);
    }
    return code;
}
