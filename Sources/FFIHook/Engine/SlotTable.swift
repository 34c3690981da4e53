/// The closure of every slot the registry knows, by slot address: open addressing with
/// linear probing over 4-byte buckets that hold a cell index plus one (0 is empty); the
/// address a bucket stands for is read from the cell's slot record.
///
/// A Swift dictionary from address to cell would cost 12 bytes a bucket, more than the
/// closure budget of a slot whose hooks are gone allows. Grows at three quarters full;
/// removal shifts later buckets back, so no tombstones pile up. Used only under the
/// registry's lock.
struct SlotTable {
    private var buckets: [UInt32] = Array(repeating: 0, count: 16)
    /// How many addresses the table holds.
    private(set) var count = 0

    /// The cell of `address`, if the table has one.
    func cell(at address: UInt, in pool: ClosurePool) -> ClosurePool.Cell? {
        var index = home(address)
        while buckets[index] != 0 {
            let cell = ClosurePool.Cell(index: buckets[index] - 1)
            if pool.slot(cell).pointee.address == address { return cell }
            index = (index + 1) & (buckets.count - 1)
        }
        return nil
    }

    /// Records `cell` for the address in its slot record, replacing a cell the address had.
    mutating func insert(_ cell: ClosurePool.Cell, in pool: ClosurePool) {
        let address = pool.slot(cell).pointee.address
        if let existing = self.cell(at: address, in: pool) { remove(existing, in: pool) }
        if (count + 1) * 4 > buckets.count * 3 { grow(in: pool) }
        place(cell, address: address)
        count += 1
    }

    /// Forgets `cell`, which the table must hold.
    mutating func remove(_ cell: ClosurePool.Cell, in pool: ClosurePool) {
        let mask = buckets.count - 1
        var hole = home(pool.slot(cell).pointee.address)
        while buckets[hole] != cell.index + 1 { hole = (hole + 1) & mask }
        buckets[hole] = 0
        count -= 1
        // Shift back every later bucket of the run whose home does not lie between the hole
        // and itself, so lookups never stop at the hole early.
        var next = (hole + 1) & mask
        while buckets[next] != 0 {
            let moved = ClosurePool.Cell(index: buckets[next] - 1)
            let wanted = home(pool.slot(moved).pointee.address)
            let reachable = hole <= next ? (wanted > hole && wanted <= next) : (wanted > hole || wanted <= next)
            if !reachable {
                buckets[hole] = buckets[next]
                buckets[next] = 0
                hole = next
            }
            next = (next + 1) & mask
        }
    }

    /// Every cell whose address lies in `range`.
    func cells(in range: ClosedRange<UInt>, in pool: ClosurePool) -> [ClosurePool.Cell] {
        buckets.compactMap { bucket in
            guard bucket != 0 else { return nil }
            let cell = ClosurePool.Cell(index: bucket - 1)
            return range.contains(pool.slot(cell).pointee.address) ? cell : nil
        }
    }

    private func home(_ address: UInt) -> Int {
        // Fibonacci hashing: slot addresses are 8-byte aligned and often close together.
        Int(truncatingIfNeeded: (address &* 0x9E37_79B9_7F4A_7C15) >> 32) & (buckets.count - 1)
    }

    private mutating func place(_ cell: ClosurePool.Cell, address: UInt) {
        var index = home(address)
        while buckets[index] != 0 { index = (index + 1) & (buckets.count - 1) }
        buckets[index] = cell.index + 1
    }

    private mutating func grow(in pool: ClosurePool) {
        let old = buckets
        buckets = Array(repeating: 0, count: old.count * 2)
        for bucket in old where bucket != 0 {
            let cell = ClosurePool.Cell(index: bucket - 1)
            place(cell, address: pool.slot(cell).pointee.address)
        }
    }
}
