// liblate.so: a traced library that is not loaded at the start; plugin.so needs it.
int late_square(int value) { return value * value; }
