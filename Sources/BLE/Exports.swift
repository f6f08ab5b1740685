// `import BLE` is enough for an application (issue 25): the value types its API speaks in come
// with it, as `import NIO` brings NIOCore's. Addresses, UUIDs and status codes (HCI), transport
// specs and errors (Transport), ATT errors and security (ATT), services and characteristics
// (GATT). The protocol machinery below (Host, L2CAP, SMP) stays behind the BLE API.
@_exported import HCI
@_exported import Transport
@_exported import ATT
@_exported import GATT
// The connection-parameter types of `CentralEvent` and `StackOptions.connectionParameterPolicy`.
@_exported import struct Host.ConnectionParameters
@_exported import struct L2CAP.ConnectionParameterUpdateRequest
