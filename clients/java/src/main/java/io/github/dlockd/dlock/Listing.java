// LIST's answer: the locks matching a pattern, parsed from dlockd's counted reply.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;

/**
 * What {@link DlockClient#list} answers: the entries in dlockd's order, and {@code more}
 * when more names matched than were told (raise the limit or narrow the pattern).
 */
public record Listing(List<Entry> entries, boolean more) {
    /** The largest limit LIST takes. */
    public static final int LIMIT_MAX = 1000;

    public Listing {
        entries = Collections.unmodifiableList(new ArrayList<>(entries));
    }

    /**
     * One lock. {@code kind}: {@code lock}, {@code read}, {@code write}, {@code fair},
     * {@code elect}, {@code sem} or {@code latch}; {@code ttlMs} -1 for no expiry;
     * {@code fence} empty for a semaphore or a latch; {@code value} an election's value, a
     * semaphore's free permits or a latch's count, null for none.
     */
    public record Entry(String name, String kind, long ttlMs, OptionalLong fence,
                        Parties holders, Parties waiters, String value) { }

    /** An entry's holders or waiters: how many in all, and up to 8 of them described. */
    public record Parties(int total, List<Party> list) {
        public Parties {
            list = Collections.unmodifiableList(new ArrayList<>(list));
        }
    }

    /**
     * A holder or waiter: its dlockd's host and pid, the client's pid and uid, its count
     * (holds, permits, or permits asked) and age; null or -1 where dlockd does not know.
     */
    public record Party(String host, long dlockdPid, long pid, long uid, long count, long ageMs) { }

    /** The n of a header {@code OK LIST <n> <more>}; -1 if it is not one. */
    static int count(String header) {
        String[] w = header.split(" ", -1);
        if (w.length != 4 || !w[0].equals("OK") || !w[1].equals("LIST")
                || !(w[3].equals("0") || w[3].equals("1")) || !w[2].matches("0|[1-9][0-9]{0,3}"))
            return -1;
        int n = Integer.parseInt(w[2]);
        return n > LIMIT_MAX ? -1 : n;
    }

    /** Parses the header and its lines, joined by LF as the reader hands them over. */
    static Listing parse(String reply) {
        String[] lines = reply.split("\n", -1);
        int n = count(lines[0]);
        if (n != lines.length - 1)
            throw new ProtocolException(null, "unexpected LIST reply: " + lines[0]);
        List<Entry> entries = new ArrayList<>(n);
        for (int i = 1; i <= n; i++)
            entries.add(entry(lines[i]));
        return new Listing(entries, lines[0].endsWith(" 1"));
    }

    private static Entry entry(String line) {
        String[] w = line.split(" ", -1);
        if (w.length != 8 || !w[0].equals("="))
            throw bad(line);
        try {
            long ttl = Long.parseLong(w[3]);
            OptionalLong fence = w[4].equals("-") ? OptionalLong.empty()
                    : OptionalLong.of(Long.parseUnsignedLong(w[4]));
            return new Entry(w[1], w[2], ttl, fence, parties(w[5], line), parties(w[6], line),
                    w[7].equals("-") ? null : w[7]);
        } catch (NumberFormatException e) {
            throw bad(line);
        }
    }

    private static Parties parties(String word, String line) {
        String[] parts = word.split(",", -1);
        int total = Integer.parseInt(parts[0]);
        if (total < 0)
            throw bad(line);
        List<Party> list = new ArrayList<>();
        for (int i = 1; i < parts.length; i++) {
            String[] f = parts[i].split("/", -1);
            if (f.length != 6)
                throw bad(line);
            long[] n = new long[5];
            for (int k = 0; k < 5; k++) {
                n[k] = f[k + 1].equals("-") ? -1 : Long.parseLong(f[k + 1]);
                if (n[k] < -1 || (n[k] == -1 && !f[k + 1].equals("-")))
                    throw bad(line);
            }
            list.add(new Party(f[0].equals("-") ? null : f[0], n[0], n[1], n[2], n[3], n[4]));
        }
        return new Parties(total, list);
    }

    private static ProtocolException bad(String line) {
        return new ProtocolException(null, "bad LIST entry: " + line);
    }
}
