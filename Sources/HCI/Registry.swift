// Every typed command and event the stack knows. A type missing here still works in the
// stack but shows as "Unknown" in `dump`; HCITests checks each list has no duplicate code.

let allCommandTypes: [any HCICommand.Type] = [
    Reset.self, SetEventMask.self, ReadLocalVersionInformation.self, ReadBDADDR.self, Disconnect.self,
]

let allEventTypes: [any HCIEventParameters.Type] = [
    CommandComplete.self, CommandStatus.self, DisconnectionComplete.self, NumberOfCompletedPackets.self,
    LEMetaEvent.self,
]

let allLESubeventTypes: [any LEMetaEventParameters.Type] = [
    LEConnectionComplete.self,
]
