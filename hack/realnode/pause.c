/* The pod sandbox's process: sleep until SIGTERM/SIGINT, reap children. Built static by
 * hack/realimages.sh into the image kuberl.local/pause (no registry is needed). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
  return 0;
}
