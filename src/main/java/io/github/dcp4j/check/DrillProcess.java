package io.github.dcp4j.check;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * What a fault drill does to its own process that Java has no call for, through the C library: setting a variable
 * in the process's C environment (which CUDA reads, not {@link System#getenv()}), and sending itself SIGKILL
 * ({@link ProcessHandle#destroyForcibly()} refuses the current process). Used by {@link FaultDrill} alone.
 */
final class DrillProcess {
    /** Linux's SIGKILL. */
    private static final int SIGKILL = 9;
    private static final Linker LINKER = Linker.nativeLinker();

    private DrillProcess() {
    }

    private static MethodHandle libc(String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = LINKER.defaultLookup().find(name)
                .orElseThrow(() -> new IllegalStateException("the C library has no " + name));
        return LINKER.downcallHandle(symbol, descriptor);
    }

    /**
     * Sets {@code name} to {@code value} in this process's C environment; call it before anything reads it (CUDA
     * reads the MPS variables when it first initialises).
     */
    static void setenv(String name, String value) {
        MethodHandle setenv = libc("setenv", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
                ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        try (Arena arena = Arena.ofConfined()) {
            int result = (int) setenv.invokeExact(arena.allocateFrom(name), arena.allocateFrom(value), 1);
            if (result != 0) {
                throw new IllegalStateException("setenv(" + name + ") failed");
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("setenv(" + name + ") failed: " + t, t);
        }
    }

    /** Sends SIGKILL to this process: no shutdown hook, no cleanup, as a crash or an OOM killer would. */
    static void killSelf() {
        MethodHandle kill = libc("kill", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                ValueLayout.JAVA_INT));
        try {
            int result = (int) kill.invokeExact((int) ProcessHandle.current().pid(), SIGKILL);
            throw new IllegalStateException("kill(SIGKILL) of this process returned " + result);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("kill(SIGKILL) of this process failed: " + t, t);
        }
    }
}
