"""scripts/check-circles.py on object files compiled here, in the build
layout it reads (libcommon/CMakeFiles/lc_<room>.dir/<room>/src/*.o and
services/<svc>/CMakeFiles/<svc>.dir/src/*.o): a circle between two files of
one room fails and is named with its symbols; a chain, or a circle that runs
through two rooms, passes; objects whose source is gone are not read."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "..", "..", "scripts", "check-circles.py")
CC = os.environ.get("CC", "cc")


def compile_room(build, objdir, files):
    """files: {name.c: C source}; objects go where CMake would put them."""
    out = os.path.join(build, objdir)
    os.makedirs(out, exist_ok=True)
    for name, text in files.items():
        src = os.path.join(build, "src-" + name)
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        subprocess.run([CC, "-c", "-o", os.path.join(out, name + ".o"), src], check=True)


def run_checker(build, *extra):
    return subprocess.run([sys.executable, CHECKER, build, *extra], capture_output=True,
                          text=True)


# a.c calls b.c, and b.c calls a.c back: a circle.
CIRCLE = {"a.c": "int b_two(void);\nint a_one(void) { return b_two() + 1; }\n",
          "b.c": "int a_one(void);\nint b_two(void) { return 2; }\n"
                 "int b_three(void) { return a_one(); }\n"}
# a.c -> b.c -> c.c: a chain, no circle.
CHAIN = {"a.c": "int b_two(void);\nint a_one(void) { return b_two(); }\n",
         "b.c": "int c_three(void);\nint b_two(void) { return c_three(); }\n",
         "c.c": "int c_three(void) { return 3; }\n"}


class CheckCircles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.build = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_circle_in_a_libcommon_room_fails_naming_files_and_symbols(self):
        compile_room(self.build, "libcommon/CMakeFiles/lc_demo.dir/demo/src", CIRCLE)
        r = run_checker(self.build)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("libcommon/demo: circle between 2 files: a.c, b.c", r.stdout)
        self.assertIn("a.c -> b.c: b_two", r.stdout)
        self.assertIn("b.c -> a.c: a_one", r.stdout)

    def test_circle_in_a_service_fails(self):
        compile_room(self.build, "services/svc/CMakeFiles/svc.dir/src", CIRCLE)
        r = run_checker(self.build)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("services/svc: circle between 2 files: a.c, b.c", r.stdout)

    def test_chain_passes(self):
        compile_room(self.build, "libcommon/CMakeFiles/lc_demo.dir/demo/src", CHAIN)
        r = run_checker(self.build)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertNotIn("circle", r.stdout)

    def test_a_circle_through_two_rooms_is_not_a_room_circle(self):
        compile_room(self.build, "libcommon/CMakeFiles/lc_one.dir/one/src", {"a.c": CIRCLE["a.c"]})
        compile_room(self.build, "libcommon/CMakeFiles/lc_two.dir/two/src", {"b.c": CIRCLE["b.c"]})
        r = run_checker(self.build)
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_objects_of_deleted_sources_are_left_out(self):
        compile_room(self.build, "libcommon/CMakeFiles/lc_demo.dir/demo/src", CIRCLE)
        src = os.path.join(self.build, "tree")
        os.makedirs(os.path.join(src, "libcommon/demo/src"))
        with open(os.path.join(self.build, "CMakeCache.txt"), "w", encoding="utf-8") as f:
            f.write(f"CMAKE_HOME_DIRECTORY:INTERNAL={src}\n")
        for name in ("a.c", "b.c"):
            open(os.path.join(src, "libcommon/demo/src", name), "w", encoding="utf-8").close()
        self.assertEqual(run_checker(self.build).returncode, 1)
        os.remove(os.path.join(src, "libcommon/demo/src/b.c"))  # b.c.o is now stale
        r = run_checker(self.build)
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_no_objects_is_an_error(self):
        r = run_checker(self.build)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no object files", r.stdout)


if __name__ == "__main__":
    unittest.main()
