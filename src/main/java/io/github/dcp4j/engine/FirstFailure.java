package io.github.dcp4j.engine;

/**
 * Collects the failures of several ranks or launches of one call: the first is the one raised, every later one is
 * suppressed in it, so that nothing is lost and the report starts with the lowest rank's.
 *
 * @param <E> the kind of failure
 */
public final class FirstFailure<E extends RuntimeException> {
    private E first;

    /** An empty collection of failures. */
    public FirstFailure() {
    }

    /**
     * Records {@code failure}: the first one kept, each later one suppressed in it.
     *
     * @param failure a failure of one rank or launch
     */
    public void add(E failure) {
        if (first == null) {
            first = failure;
        } else {
            first.addSuppressed(failure);
        }
    }

    /**
     * The first failure.
     *
     * @return it, or null where there was none
     */
    public E first() {
        return first;
    }

    /**
     * Runs every step, even after one fails (releasing resources: each is freed whatever happened to the others),
     * then throws the first failure with the later ones suppressed in it.
     *
     * @param steps what to run, in order
     */
    public static void runAll(Runnable... steps) {
        FirstFailure<RuntimeException> failure = new FirstFailure<>();
        for (Runnable step : steps) {
            try {
                step.run();
            } catch (RuntimeException e) {
                failure.add(e);
            }
        }
        failure.throwIfAny();
    }

    /** Throws the first failure, if there was one. */
    public void throwIfAny() {
        if (first != null) {
            throw first;
        }
    }
}
