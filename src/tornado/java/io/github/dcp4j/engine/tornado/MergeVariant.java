package io.github.dcp4j.engine.tornado;

import uk.ac.manchester.tornado.api.common.TornadoFunctions.Task8;
import uk.ac.manchester.tornado.api.types.arrays.DoubleArray;
import uk.ac.manchester.tornado.api.types.arrays.FloatArray;
import uk.ac.manchester.tornado.api.types.arrays.IntArray;
import uk.ac.manchester.tornado.api.types.arrays.LongArray;
import uk.ac.manchester.tornado.api.types.arrays.ShortArray;

import java.lang.invoke.LambdaMetafactory;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Objects;

/**
 * A merge task of the TornadoVM engine's graph, written in Java: a reference to a public static method with
 * {@link MergeTasks#merge}'s parameters, which TornadoVM compiles to PTX in place of the engine's own (docs/TORNADO.md,
 * "Supplying a merge of your own"). It runs after the exchange and weights tasks: it reads the weights, the received
 * lines from the destination's workspace and the own slice from the input (through the index table), and writes
 * every destination's output rows, NaN where {@code failed} marks a row. {@link ExampleMerges#elementPerThread} is
 * one.
 *
 * <p>TornadoVM finds the method to compile in the reference's class, so a variant must be a method reference (or a
 * lambda that calls one static method), not an object whose method does the work.
 */
@FunctionalInterface
public interface MergeVariant
        extends Task8<IntArray, LongArray, ShortArray, IntArray, FloatArray, IntArray, ShortArray, DoubleArray> {

    /** The system property that names the merge of groups opened without one: {@code Class::method}. */
    String PROPERTY = "dcp4j.tornado.merge";

    /**
     * A merge and the name reports give it.
     *
     * @param name  {@code default}, or the method as {@code Class::method}
     * @param merge the task
     */
    record Named(String name, MergeVariant merge) {
        /**
         * Checks both.
         *
         * @param name  the name
         * @param merge the task
         */
        public Named {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(merge, "merge");
        }

        /** {@return the name} */
        @Override
        public String toString() {
            return name;
        }
    }

    /** {@return the engine's own merge, MergeTasks::merge, named {@code default}} */
    static Named standard() {
        return new Named("default", MergeTasks::merge);
    }

    /**
     * The merge {@link #PROPERTY} names, or the engine's own where it is unset, empty or {@code default}.
     *
     * @return the merge
     * @throws IllegalArgumentException where the property names no public static method of merge's parameters
     */
    static Named fromSystemProperty() {
        String spec = System.getProperty(PROPERTY, "").strip();
        return spec.isEmpty() || spec.equals("default") ? standard() : named(spec);
    }

    /**
     * The public static method {@code spec} names, as a merge.
     *
     * @param spec {@code fully.qualified.Class::method}
     * @return the merge, named {@code spec}
     * @throws IllegalArgumentException where {@code spec} is malformed or names no public static void method with
     *         MergeTasks.merge's parameters
     */
    static Named named(String spec) {
        Objects.requireNonNull(spec, "spec");
        int sep = spec.indexOf("::");
        if (sep <= 0 || sep + 2 >= spec.length()) {
            throw new IllegalArgumentException(PROPERTY + " must be 'default' or Class::method (a public static method"
                    + " with MergeTasks.merge's parameters); got '" + spec + "'");
        }
        String className = spec.substring(0, sep);
        String methodName = spec.substring(sep + 2);
        MethodType type = MethodType.methodType(void.class, IntArray.class, LongArray.class, ShortArray.class,
                IntArray.class, FloatArray.class, IntArray.class, ShortArray.class, DoubleArray.class);
        try {
            Class<?> owner = Class.forName(className, true, MergeVariant.class.getClassLoader());
            MethodHandles.Lookup lookup = MethodHandles.lookup();
            MethodHandle target = lookup.findStatic(owner, methodName, type);
            // a class whose apply calls the method with invokestatic, as a method reference's does: TornadoVM reads
            // that call to find the method it compiles
            MethodHandle factory = LambdaMetafactory.metafactory(lookup, "apply",
                    MethodType.methodType(MergeVariant.class), type.erase(), target, type).getTarget();
            return new Named(spec, (MergeVariant) factory.invoke());
        } catch (ClassNotFoundException e) {
            throw new IllegalArgumentException(PROPERTY + " names class " + className + ", which is not on the class"
                    + " path", e);
        } catch (NoSuchMethodException | IllegalAccessException e) {
            throw new IllegalArgumentException(PROPERTY + " names " + spec + ", which is no public static void method"
                    + " with MergeTasks.merge's parameters " + type, e);
        } catch (Throwable e) {
            throw new IllegalStateException("cannot make a merge task of " + spec, e);
        }
    }
}
