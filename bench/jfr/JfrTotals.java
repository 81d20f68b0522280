// The in-run reference of bench/jfr_bench.py: the JDK's own JFR parser
// (jdk.jfr.consumer) reads each recording ITERATIONS times and sums, by
// Pyroscope's conversion rules, the same per-type totals jfr_bench prints.
// Usage: java JfrTotals.java ITERATIONS FILE.jfr...   (files already gunzipped)
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

public class JfrTotals {
    static void add(Map<String, Long> m, String k, long v) {
        m.merge(k, v, Long::sum);
    }

    static Map<String, Long> totals(Path p) throws Exception {
        Map<String, Long> t = new TreeMap<>();
        long period = 1_000_000_000L / 100;
        try (RecordingFile f = new RecordingFile(p)) {
            while (f.hasMoreEvents()) {
                RecordedEvent e = f.readEvent();
                if (e.getStackTrace() == null)
                    continue;
                switch (e.getEventType().getName()) {
                case "jdk.ExecutionSample" -> {
                    String st = e.hasField("state") ? e.getString("state") : null;
                    if (st != null && !st.equals("STATE_SLEEPING"))
                        add(t, "process_cpu:cpu:nanoseconds", period);
                }
                case "jdk.ObjectAllocationInNewTLAB" -> {
                    add(t, "memory:alloc_in_new_tlab_objects:count", 1);
                    add(t, "memory:alloc_in_new_tlab_bytes:bytes", e.getLong("tlabSize"));
                }
                case "jdk.ObjectAllocationOutsideTLAB" -> {
                    add(t, "memory:alloc_outside_tlab_objects:count", 1);
                    add(t, "memory:alloc_outside_tlab_bytes:bytes", e.getLong("allocationSize"));
                }
                case "jdk.ObjectAllocationSample" -> {
                    add(t, "memory:alloc_sample_objects:count", 1);
                    add(t, "memory:alloc_sample_bytes:bytes", e.getLong("weight"));
                }
                case "jdk.JavaMonitorEnter" -> {
                    add(t, "mutex:contentions:count", 1);
                    add(t, "mutex:delay:nanoseconds", e.getDuration().toNanos());
                }
                case "jdk.ThreadPark" -> {
                    add(t, "block:contentions:count", 1);
                    add(t, "block:delay:nanoseconds", e.getDuration().toNanos());
                }
                default -> { }
                }
            }
        }
        return t;
    }

    public static void main(String[] args) throws Exception {
        int iterations = Integer.parseInt(args[0]);
        for (int i = 1; i < args.length; i++) {
            Path p = Path.of(args[i]);
            Map<String, Long> t = totals(p); // warm-up, not timed
            long t0 = System.nanoTime();
            for (int k = 0; k < iterations; k++)
                t = totals(p);
            double secs = (System.nanoTime() - t0) / 1e9;
            long bytes = Files.size(p);
            StringBuilder sb = new StringBuilder();
            for (var en : t.entrySet())
                sb.append(sb.length() > 0 ? ", " : "").append('"').append(en.getKey()).append("\": ").append(en.getValue());
            System.out.printf("{\"file\": \"%s\", \"bytes\": %d, \"iterations\": %d, \"seconds\": %.6f, "
                    + "\"mb_per_s\": %.2f, \"totals\": {%s}}%n", args[i], bytes, iterations, secs,
                    bytes * (double) iterations / secs / 1e6, sb);
        }
    }
}
