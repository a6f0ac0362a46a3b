/* A C program using the installed library: det of a 2x2 and a 3x3 batch. */
#include <math.h>
#include <stdio.h>
#include <tinyla/tinyla.h>

int main(void) {
  const double a[] = {4, 3, 6, 3, /* det -6 */ 2, 0, 0, 0, 3, 0, 0, 0, 4 /* det 24 (n = 3 below) */};
  double d[2];
  if (tinyla_det_f64(1, 2, a, d) != TINYLA_OK || tinyla_det_f64(1, 3, a + 4, d + 1) != TINYLA_OK) return 1;
  if (fabs(d[0] + 6) > 1e-14 || fabs(d[1] - 24) > 1e-13) {
    printf("wrong: %g %g\n", d[0], d[1]);
    return 1;
  }
  printf("installed tinyla works (%s backend): det = %g, %g\n", tinyla_cpu_backend(), d[0], d[1]);
  return 0;
}
