// main() calls alpha() and beta() in turn; alpha's loop is three times
// beta's, so about 3/4 of the CPU goes to alpha. The program measures its own
// split (the thread's CPU time around each call) and prints it at the end:
// the oracle the agent's profile is compared with.
//
// Usage: java Split SECONDS. Prints "pid N" first, "split ALPHA_S BETA_S" when
// done, then exits at the end of its standard input (tests keep it alive
// until the profiler has read it).
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class Split {
    static final int UNIT = 2_000_000; // iterations of beta per round; alpha runs 3 x UNIT

    static long alpha(long seed) {
        long total = seed;
        for (int i = 0; i < 3 * UNIT; i++)
            total = total * 31 + (i ^ (total >>> 7));
        return total;
    }

    static long beta(long seed) {
        long total = seed;
        for (int i = 0; i < UNIT; i++)
            total = total * 31 + (i ^ (total >>> 7));
        return total;
    }

    public static void main(String[] args) throws java.io.IOException {
        System.out.println("pid " + ProcessHandle.current().pid());
        System.out.flush();
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        long spentAlpha = 0, spentBeta = 0, sink = 0;
        while (System.nanoTime() < end) {
            long t0 = mx.getCurrentThreadCpuTime();
            sink += alpha(sink);
            long t1 = mx.getCurrentThreadCpuTime();
            sink += beta(sink);
            long t2 = mx.getCurrentThreadCpuTime();
            spentAlpha += t1 - t0;
            spentBeta += t2 - t1;
        }
        System.out.printf("split %.6f %.6f %d%n", spentAlpha / 1e9, spentBeta / 1e9, sink & 1);
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
