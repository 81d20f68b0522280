// A program profiled by the official Java agent (io.pyroscope:agent, with
// async-profiler inside) pushing JFR to ember: CPU in emberBusyJava under
// LabelsWrapper labels, allocations in emberAllocJava, monitor contention in
// emberLockJava. Driven by tests/integration/test_sdk_java.py.
import io.pyroscope.labels.v2.LabelsSet;
import io.pyroscope.labels.v2.Pyroscope;

public class App {
    static final Object LOCK = new Object();
    static volatile Object sink;

    static long emberBusyJava(int n) {
        long h = 1469598103934665603L;
        for (int i = 0; i < n; i++) {
            h ^= i;
            h *= 1099511628211L;
        }
        return h;
    }

    static void emberAllocJava() {
        sink = new byte[256 * 1024];
    }

    static void emberLockJava() {
        synchronized (LOCK) {
            emberBusyJava(200_000);
        }
    }

    public static void main(String[] args) throws Exception {
        long deadline = System.currentTimeMillis() + Long.parseLong(System.getenv("SDK_SECONDS")) * 1000;
        Runnable contend = () -> {
            while (System.currentTimeMillis() < deadline)
                emberLockJava();
        };
        Thread t1 = new Thread(contend), t2 = new Thread(contend);
        t1.start();
        t2.start();
        Pyroscope.LabelsWrapper.run(new LabelsSet("request", "busy"), () -> {
            long x = 0;
            while (System.currentTimeMillis() < deadline) {
                x ^= emberBusyJava(2_000_000);
                emberAllocJava();
            }
            System.out.println(x);
        });
        t1.join();
        t2.join();
    }
}
