// Who leads an election: its fence and the value it campaigned with.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/**
 * The leader of an election: its fence (rising from leader to leader of the name) and
 * the value it campaigned with, e.g. {@code 10.0.0.5:8080}. {@link #toString()} is
 * {@code <fence> <value>}, as dlockd says it.
 */
public record Leader(long fence, String value) {
    @Override
    public String toString() {
        return fence + " " + value;
    }

    /** Parses {@code <fence> <value>} or {@code NONE} (words of a reply or event from {@code from}). */
    static java.util.Optional<Leader> parse(String[] w, int from, String line) {
        try {
            if (w.length == from + 1 && w[from].equals("NONE"))
                return java.util.Optional.empty();
            if (w.length == from + 2)
                return java.util.Optional.of(new Leader(Long.parseLong(w[from]), w[from + 1]));
        } catch (NumberFormatException e) {
            // falls through to the error below
        }
        throw new ProtocolException(null, "bad leader in: " + line);
    }
}
