// Advertising data (Host.AdvertisingData, Core Supplement Part A): parsing never traps, the
// structures it keeps encode to bytes that parse to the same structures, and describing them
// (with the GATT name tables, as `dump` does) never traps.
import FuzzSupport
import HCI
import Host
import GATT

runFuzzer { data in
    let ad = AdvertisingData(parsing: data)
    _ = ad.describe(companyName: { AssignedNumbers.companyName($0) }, uuidName: { AssignedNumbers.name(of: $0) },
                    appearanceName: { AssignedNumbers.appearanceName($0) })
    let again = AdvertisingData(parsing: AdvertisingData(ad.structures).bytes)
    require(again.structures == ad.structures, "AD structures do not survive encode/parse")
}
