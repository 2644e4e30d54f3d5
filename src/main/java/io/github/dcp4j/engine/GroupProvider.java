package io.github.dcp4j.engine;

import io.github.dcp4j.op.WorkspaceSpec;

import java.time.Duration;
import java.util.Optional;

/**
 * An engine found at run time through {@link java.util.ServiceLoader}: one whose classes and runtime are not in
 * dcp4j's jar, such as a TornadoVM engine run with TornadoVM's argument file. The engine factory lists the providers
 * it finds and opens a group by the provider's name. dcp4j's tornado jar holds one (docs/TORNADO.md).
 */
public interface GroupProvider {

    /**
     * The engine's name, as {@code --engine} spells it.
     *
     * @return the name, e.g. {@code tornado}
     */
    String engineName();

    /**
     * Why this engine cannot run in this JVM (its runtime missing or not started), checked before a group opens.
     *
     * @return the reason, or empty where groups can open
     */
    default Optional<String> unavailableReason() {
        return Optional.empty();
    }

    /**
     * A group of every rank of {@code spec} in this process on this engine.
     *
     * @param spec    the workspaces' size: the largest call the group will make
     * @param timeout how long a rank waits for a peer's line before the call fails
     * @return the group; close it to free its workspaces
     * @throws IllegalStateException where the engine cannot run here (with the reason)
     */
    LocalGroup open(WorkspaceSpec spec, Duration timeout);
}
