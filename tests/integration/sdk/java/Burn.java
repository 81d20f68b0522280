// A JVM workload recorded by the JDK's own Flight Recorder (no agent) for
// test_sdk_java.py's JDK-recording test: CPU in burn(), byte[] allocations,
// and a contended monitor. Run as `java Burn.java SECONDS`.
public class Burn {
    static final Object LOCK = new Object();
    static volatile Object sink;

    static long burn(int n) {
        long h = 1469598103934665603L;
        for (int i = 0; i < n; i++) {
            h ^= i;
            h *= 1099511628211L;
            if ((i & 1023) == 0)
                sink = new byte[1024];
        }
        return h;
    }

    public static void main(String[] args) throws Exception {
        long deadline = System.currentTimeMillis() + Long.parseLong(args[0]) * 1000;
        Runnable r = () -> {
            long x = 0;
            while (System.currentTimeMillis() < deadline) {
                synchronized (LOCK) {
                    x ^= burn(500_000);
                }
            }
            System.out.println(x);
        };
        Thread t = new Thread(r);
        t.start();
        r.run();
        t.join();
    }
}
