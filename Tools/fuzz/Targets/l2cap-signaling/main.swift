// L2CAP LE signaling (L2CAP.SignalingCommand): what decodes encodes back to the same command,
// and what the stack answers a command it cannot decode (Command Reject) is itself a valid
// command that fits the signaling MTU (23, Core Vol 3 Part A 4). The same octets as a BR/EDR
// C-frame (L2CAP.ACLUSignalingCommand, one command or more): each command decoded encodes back
// to octets that decode to it again.
import FuzzSupport
import HCI
import L2CAP

runFuzzer { data in
    if case .success(let command) = Result(catching: { () throws(DecodeError) in try SignalingCommand.decode(data) }) {
        _ = command.fields
        let again = Result(catching: { () throws(DecodeError) in try SignalingCommand.decode(command.bytes) })
        require((try? again.get()) == command, "signaling command does not survive encode/decode: \(data)")
    }
    if let reject = SignalingCommand.rejection(for: data) {
        let bytes = reject.bytes
        require(bytes.count <= 23, "Command Reject of \(bytes.count) octets")
        require((try? SignalingCommand.decode(bytes)) == reject, "Command Reject does not decode")
    }
    let (commands, _) = ACLUSignalingCommand.decodeAll(data)
    require(commands.count <= data.count / 4, "more commands than 4-octet headers")
    for command in commands {
        _ = command.fields
        let (again, error) = ACLUSignalingCommand.decodeAll(command.bytes)
        require(error == nil && again == [command], "BR/EDR signaling command does not survive encode/decode: \(data)")
    }
}
