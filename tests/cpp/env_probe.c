/* Prints what the library made of its environment (for test_env.cpp). */
#include <stdio.h>
#include <tinyla/tinyla.h>

int main(void) {
  printf("%d %s\n", tinyla_get_num_threads(), tinyla_cpu_backend());
  return 0;
}
