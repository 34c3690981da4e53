/* Calls libc's strchr 5 times and index 2 times: in glibc they are one function (one address,
   two names), which an inline batch plans once, under one of them. The tracer must report the
   calls under the name --symbols chose. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

int main(void) {
    const char *text = "a line of text";
    int found = 0;
    for (int i = 0; i < 5; i++) found += strchr(text, 'x') != NULL;
    for (int i = 0; i < 2; i++) found += index(text, 'f') != NULL;
    printf("%d\n", found);
    return 0;
}
