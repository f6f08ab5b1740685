import Testing
import HCI
@testable import VirtualController
@Test func debugConnect() {
    let p = Pair()
    p.b.send(LESetAdvertisingParameters()); p.link.runUntilIdle()
    print("DBG1", p.b.take())
    p.b.send(LESetAdvertisingEnable(advertisingEnable: true)); p.link.runUntilIdle()
    print("DBG2", p.b.take())
    p.a.send(LECreateConnection(peerAddressType: .public, peerAddress: p.b.controller.publicAddress))
    p.link.runUntilIdle()
    print("DBG3", p.a.take(), p.b.take(), p.link.log)
}
