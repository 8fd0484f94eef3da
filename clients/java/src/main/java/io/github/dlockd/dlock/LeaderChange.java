// What an observation of an election tells: a (new) leader, or nobody.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.Optional;

/**
 * A change of an election's leader, as an {@link Observation} reports it: the new
 * {@link Leader}, or empty when nobody leads (or dlockd cannot tell: Redis out of reach
 * longer than a lease). {@link #toString()} is {@code <fence> <value>} or {@code NONE}.
 */
public record LeaderChange(String name, Optional<Leader> leader) {
    /** Whether nobody leads. */
    public boolean isNone() {
        return leader.isEmpty();
    }

    @Override
    public String toString() {
        return leader.map(Leader::toString).orElse("NONE");
    }
}
