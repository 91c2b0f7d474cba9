/* hiredis's reply reader over a corpus that benches/resp.rs wrote: the C reference of issue 24.
 *
 * Usage: reader FILE VALUES ROUNDS MODE. Feeds FILE to one redisReader in 16 KiB pieces
 * (hiredis's own read size, REDIS_READER_MAX_BUF), takes every reply after each piece, and
 * checks that VALUES replies came out. MODE `objects` builds hiredis's reply objects (copies of
 * every string) and frees them; `framing` gives the reader no reply functions, so that it only
 * finds where each reply ends, as an argv or span decoder does. Prints the median throughput
 * of ROUNDS passes in MiB/s, the unit criterion prints. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PIECE (16 * 1024)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One pass over the corpus: the number of replies read, or -1 on a protocol error. */
static long one_pass(const char *data, size_t len, int framing) {
    redisReader *reader = redisReaderCreate();
    if (framing) reader->fn = NULL;
    long replies = 0;
    for (size_t at = 0; at < len; at += PIECE) {
        size_t n = len - at < PIECE ? len - at : PIECE;
        if (redisReaderFeed(reader, data + at, n) != REDIS_OK) {
            replies = -1;
            break;
        }
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
                redisReaderFree(reader);
                return -1;
            }
            if (reply == NULL) break;
            if (!framing) freeReplyObject(reply);
            replies++;
        }
    }
    redisReaderFree(reader);
    return replies;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE VALUES ROUNDS objects|framing\n", argv[0]);
        return 2;
    }
    long values = atol(argv[2]);
    int rounds = atoi(argv[3]);
    if (rounds < 1 || rounds > 1000) rounds = 20;
    int framing = argv[4][0] == 'f';
    FILE *file = fopen(argv[1], "rb");
    if (!file) {
        perror(argv[1]);
        return 1;
    }
    fseek(file, 0, SEEK_END);
    long len = ftell(file);
    rewind(file);
    char *data = malloc(len > 0 ? (size_t)len : 1);
    if (!data || fread(data, 1, (size_t)len, file) != (size_t)len) {
        fprintf(stderr, "%s: short read\n", argv[1]);
        return 1;
    }
    fclose(file);
    double mib_s[1000];
    for (int i = 0; i < rounds; i++) {
        double start = now();
        long replies = one_pass(data, (size_t)len, framing);
        double took = now() - start;
        if (replies != values) {
            fprintf(stderr, "%s: %ld replies, expected %ld\n", argv[1], replies, values);
            return 1;
        }
        mib_s[i] = len / took / (1024.0 * 1024.0);
    }
    qsort(mib_s, (size_t)rounds, sizeof mib_s[0], by_value);
    printf("%.0f\n", mib_s[rounds / 2]);
    free(data);
    return 0;
}
