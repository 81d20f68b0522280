/*
 * replay_main.c — stands in for libFuzzer's main in non-fuzz builds: runs every
 * file of the corpus directories given (flags starting with '-' are ignored),
 * so the committed corpus is a regression test in every build.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *d = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(d, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(d, got);
    free(d);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        DIR *dir = opendir(argv[i]);
        if (!dir) {
            files += run_file(argv[i]) == 0;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir))) {
            char p[4096];
            struct stat st;
            snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && run_file(p) == 0)
                files++;
        }
        closedir(dir);
    }
    printf("replayed %d inputs\n", files);
    return files > 0 ? 0 : 1;
}
