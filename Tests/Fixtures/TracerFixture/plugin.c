// plugin.so: loaded with dlopen by the program; its calls of libtracee and liblate count.
int tracee_add(int a, int b);
int late_square(int value);

int plugin_run(int times) {
    int sum = 0;
    for (int index = 0; index < times; index++) sum += late_square(index % 7) + tracee_add(index, 1);
    return sum;
}
