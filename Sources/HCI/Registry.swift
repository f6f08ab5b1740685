// The tables of every typed command, event and LE subevent (allCommandTypes, allEventTypes,
// allLESubeventTypes) are generated from Tools/pdl/hci.pdl into Generated/HCI.swift. A type
// missing there still works in the stack but shows as "Unknown" in `dump`; HCITests checks each
// table has no duplicate code.

/// The registered command types (for the virtual controller's supported-commands mask and tests).
public var registeredCommandTypes: [any HCICommand.Type] { allCommandTypes }
public var registeredEventTypes: [any HCIEventParameters.Type] { allEventTypes }
public var registeredLESubeventTypes: [any LEMetaEventParameters.Type] { allLESubeventTypes }
