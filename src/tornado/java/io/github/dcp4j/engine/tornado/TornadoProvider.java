package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.engine.GroupProvider;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.op.WorkspaceSpec;

import java.time.Duration;
import java.util.Optional;

/**
 * The engine factory's way to the TornadoVM engine ({@code --engine tornado}): listed in the tornado jar's
 * META-INF/services, so found wherever that jar is on the class path. Groups open with
 * {@link TornadoEngine.Options#fromSystemProperties()}: {@code -Ddcp4j.tornado.merge=Class::method} picks the merge,
 * {@code -Ddcp4j.tornado.cudaGraph=true} CUDA-graph executions. Loading this class needs no TornadoVM runtime.
 */
public final class TornadoProvider implements GroupProvider {
    /** For ServiceLoader. */
    public TornadoProvider() {
    }

    @Override
    public String engineName() {
        return TornadoEngine.NAME;
    }

    @Override
    public Optional<String> unavailableReason() {
        try {
            return Optional.ofNullable(TornadoEngine.unavailableReason());
        } catch (LinkageError e) {
            return Optional.of("TornadoVM's API is not on the class path (run with the argument file that"
                    + " tornado-config/make-argfile writes): " + e);
        }
    }

    @Override
    public LocalGroup open(WorkspaceSpec spec, Duration timeout) {
        return TornadoEngine.open(spec, timeout, TornadoEngine.Options.fromSystemProperties());
    }
}
